package cni

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Pod is what the plugin tells the agent of a pod it wired (or unwired).
type Pod struct {
	ContainerID string `json:"containerID"`
	// Namespace and Name are the Kubernetes pod's (CNI_ARGS
	// K8S_POD_NAMESPACE, K8S_POD_NAME): an agent enforcing NetworkPolicy
	// writes the pod's policy before it answers ADD, and refuses an ADD
	// that names no pod.
	Namespace   string       `json:"namespace,omitempty"`
	Name        string       `json:"name,omitempty"`
	IfName      string       `json:"ifname"`
	Netns       string       `json:"netns,omitempty"`
	HostIf      string       `json:"hostIf"`
	HostIfIndex int          `json:"hostIfIndex,omitempty"`
	Addrs       []netip.Addr `json:"addrs,omitempty"`
}

// The agent's socket serves these paths (pkg/cni/cnisocket): GET status,
// PUT and DELETE a Pod (JSON).
const (
	PathStatus = "/v1/status"
	PathPods   = "/v1/pods"
)

// agent is the plugin's client of the agent's socket.
type agent struct {
	socket string
	// wait: how long ADD waits for an agent that is not up yet (it may be
	// restarting) before failing.
	wait time.Duration
}

// ErrAgentDown: nothing answers on the socket.
var ErrAgentDown = errors.New("netcube agent is not running")

// callTimeout bounds one call: connecting, the agent's work, its answer.
const callTimeout = 10 * time.Second

// call sends one request, retrying while the agent is down, for up to
// a.wait.
func (a agent) call(method, path string, body any) error {
	var buf []byte
	if body != nil {
		var err error
		if buf, err = json.Marshal(body); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(a.wait)
	for {
		status, msg, err := a.roundTrip(method, path, buf)
		if err == nil {
			if status == 200 {
				return nil
			}
			return fmt.Errorf("netcube agent: %s", bytes.TrimSpace(msg))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (%s: %v)", ErrAgentDown, a.socket, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// roundTrip makes one HTTP/1.0 request on a connection of its own and
// reads the answer to the end (an HTTP/1.0 server closes after it, so the
// body needs no framing). It is all the HTTP the plugin needs, and not
// linking net/http takes its initialization off every pod's start.
func (a agent) roundTrip(method, path string, body []byte) (status int, msg []byte, err error) {
	conn, err := net.DialTimeout("unix", a.socket, callTimeout)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(callTimeout))
	req := fmt.Sprintf("%s %s HTTP/1.0\r\nHost: agent\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		method, path, len(body))
	if _, err := conn.Write(append([]byte(req), body...)); err != nil {
		return 0, nil, err
	}
	return readResponse(bufio.NewReader(conn))
}

// readResponse reads an HTTP/1.x response: its status code and body (up
// to Content-Length if given, else to the end).
func readResponse(r *bufio.Reader) (status int, body []byte, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, nil, fmt.Errorf("read the agent's answer: %w", err)
	}
	proto, rest, _ := strings.Cut(strings.TrimRight(line, "\r\n"), " ")
	code, _, _ := strings.Cut(rest, " ")
	if status, err = strconv.Atoi(code); err != nil || !strings.HasPrefix(proto, "HTTP/1.") {
		return 0, nil, fmt.Errorf("the agent's answer is not HTTP: %q", line)
	}
	length := -1
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			return 0, nil, fmt.Errorf("read the agent's answer: %w", err)
		}
		h = strings.TrimRight(h, "\r\n")
		if h == "" {
			break
		}
		name, value, _ := strings.Cut(h, ":")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "content-length":
			if length, err = strconv.Atoi(strings.TrimSpace(value)); err != nil || length < 0 {
				return 0, nil, fmt.Errorf("the agent's answer has a bad Content-Length: %q", h)
			}
		case "transfer-encoding":
			return 0, nil, fmt.Errorf("the agent's answer is chunked, which an HTTP/1.0 request does not allow")
		}
	}
	if length >= 0 {
		body = make([]byte, length)
		_, err = io.ReadFull(r, body)
	} else {
		body, err = io.ReadAll(r)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read the agent's answer: %w", err)
	}
	return status, body, nil
}

// NotifyPod tells the agent listening on socket that pod's network changed
// (as ADD does): it attaches the pod's programs and routes its addresses
// again. For tools that give a pod another address.
func NotifyPod(socket string, p Pod) error { return agent{socket: socket}.podAdded(p) }

func (a agent) status() error          { return a.call("GET", PathStatus, nil) }
func (a agent) podAdded(p Pod) error   { return a.call("PUT", PathPods, p) }
func (a agent) podDeleted(p Pod) error { return a.call("DELETE", PathPods, p) }
