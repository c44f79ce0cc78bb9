package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"

	"github.com/netcube/netcube/lab/traffic"
)

// Holder is `netcube-lab pod hold` running in a pod (or the host
// outside): connections held open, each checked on demand (traffic.Holder).
type Holder struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// StartHold opens count connections from pod to addr with the lab binary
// lab, and returns once they are open, with what opening them found.
func (sb *Sandbox) StartHold(lab, pod, proto, addr string, count int) (*Holder, traffic.HoldReport, error) {
	cmd := exec.Command(lab, "pod", "hold", "--proto", proto, "--count", strconv.Itoa(count), addr)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, traffic.HoldReport{}, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, traffic.HoldReport{}, err
	}
	if err := sb.Start(pod, cmd); err != nil {
		return nil, traffic.HoldReport{}, err
	}
	h := &Holder{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	rep, err := h.report()
	if err != nil {
		h.Close()
		return nil, rep, err
	}
	return h, rep, nil
}

func (h *Holder) report() (traffic.HoldReport, error) {
	var rep traffic.HoldReport
	if !h.out.Scan() {
		return rep, fmt.Errorf("netcube-lab pod hold ended: %v", h.out.Err())
	}
	if err := json.Unmarshal(h.out.Bytes(), &rep); err != nil {
		return rep, fmt.Errorf("netcube-lab pod hold: %q: %v", h.out.Text(), err)
	}
	return rep, nil
}

// Check sends one request on every held connection.
func (h *Holder) Check() (traffic.HoldReport, error) {
	if _, err := fmt.Fprintln(h.in, "check"); err != nil {
		return traffic.HoldReport{}, err
	}
	return h.report()
}

// Close closes the connections and ends the process.
func (h *Holder) Close() {
	_ = h.in.Close()
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
}
