package bgp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
)

// speakerProcessEnv carries the JSON of a speakerProcess to the test binary
// run again as a speaker of its own, which the test can kill outright.
const speakerProcessEnv = "NETCUBE_BGP_SPEAKER_PROCESS"

type speakerProcess struct {
	Config Config
	Routes []Route
}

// TestHelperSpeakerProcess is not a test: it is the speaker process that
// startSpeakerProcess runs (and skips otherwise). It applies, says so on
// stdout, and waits to be killed.
func TestHelperSpeakerProcess(t *testing.T) {
	js := os.Getenv(speakerProcessEnv)
	if js == "" {
		t.Skip("the speaker process of TestBIRD's SIGKILL step, run only by it")
	}
	var sp speakerProcess
	if err := json.Unmarshal([]byte(js), &sp); err != nil {
		t.Fatal(err)
	}
	s := New(testLogger(t))
	if err := s.Apply(t.Context(), sp.Config, sp.Routes); err != nil {
		t.Fatal(err)
	}
	fmt.Println("applied")
	select {}
}

// startSpeakerProcess runs a speaker in a process of its own and returns it
// once it has applied.
func startSpeakerProcess(t *testing.T, cfg Config, routes []Route) *exec.Cmd {
	t.Helper()
	js, err := json.Marshal(speakerProcess{cfg, routes})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSpeakerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), speakerProcessEnv+"="+string(js))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testenv.LogWriter(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "applied" {
		t.Fatalf("speaker process: %q, %v", line, err)
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(testenv.LogWriter(t)) }()
	return cmd
}

// killedHard: a speaker process killed with SIGKILL runs no code of ours,
// but the kernel still closes its sockets (a FIN, or a RST where data was
// unread), so the router sees the session end at once and without a
// NOTIFICATION: with graceful restart it keeps the routes, as after
// Stop(true); without, it drops them at once. The hold time matters only
// when the node goes silent (see the hold time expiry step).
func killedHard(t *testing.T, e *birdEnv, gr bool) {
	pod, lb, lb6 := theRoutes(e)
	all := []Route{pod, lb, lb6}
	conf := e.defaultConf()
	conf.GR = gr
	e.reconfigure(conf)
	cmd := startSpeakerProcess(t, e.speakerConfig(65001, gr), all)
	testenv.WaitFor(t, 20*time.Second, "BIRD has the speaker process's routes", func() bool {
		return e.protoState() == "Established" && hasAll(e.routes(), all...)
	})
	start := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	testenv.WaitFor(t, 5*time.Second, "BIRD sees the session go", func() bool { return e.protoState() != "Established" })
	if gr {
		time.Sleep(time.Second)
		if !hasAll(e.routes(), all...) {
			t.Fatal("with graceful restart, BIRD dropped the routes of a killed speaker")
		}
		if out := e.birdc("show", "protocols", "all", "node"); !strings.Contains(out, "graceful restart active") {
			t.Errorf("BIRD is not in graceful restart:\n%s", out)
		}
		t.Logf("killed speaker, graceful restart: BIRD keeps the routes as stale (checked %s after the kill)", time.Since(start).Round(time.Millisecond))
		return
	}
	testenv.WaitFor(t, 5*time.Second, "BIRD drops the routes", func() bool { return len(e.routes()) == 0 })
	t.Logf("killed speaker, no graceful restart: routes gone %s after SIGKILL", time.Since(start).Round(time.Millisecond))
}
