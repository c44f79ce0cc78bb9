package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// Pod is what the plugin tells the agent of a pod it wired (or unwired).
type Pod struct {
	ContainerID string       `json:"containerID"`
	IfName      string       `json:"ifname"`
	Netns       string       `json:"netns,omitempty"`
	HostIf      string       `json:"hostIf"`
	HostIfIndex int          `json:"hostIfIndex,omitempty"`
	Addrs       []netip.Addr `json:"addrs,omitempty"`
}

// AgentHandler is the agent's side: what it does when the plugin calls.
type AgentHandler interface {
	// Ready: nil once the agent can attach pods (its datapath loaded).
	Ready() error
	// PodAdded attaches the pod's programs; ADD fails if it fails.
	PodAdded(Pod) error
	// PodDeleted forgets the pod (its links went with its veth).
	PodDeleted(Pod) error
}

// Serve answers the plugin on a unix socket until ctx is done. The socket
// exists only while an agent serves it: a plugin finding none knows the
// agent is down.
func Serve(ctx context.Context, socket string, h AgentHandler) error {
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return err
	}
	_ = os.Remove(socket) // a previous agent's
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("cni socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		if err := h.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	pod := func(f func(Pod) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var p Pod
			if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
				http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
				return
			}
			if err := f(p); err != nil {
				slog.Error("cni request", "method", r.Method, "pod", p.ContainerID, "iface", p.HostIf, "err", err)
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			fmt.Fprintln(w, "ok")
		}
	}
	mux.HandleFunc("PUT /v1/pods", pod(h.PodAdded))
	mux.HandleFunc("DELETE /v1/pods", pod(h.PodDeleted))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
		_ = os.Remove(socket)
	}()
	slog.Info("cni socket", "path", socket)
	go func() { _ = srv.Serve(l) }()
	return nil
}

// agent is the plugin's client of the agent's socket.
type agent struct {
	socket string
	// wait: how long ADD waits for an agent that is not up yet (it may be
	// restarting) before failing.
	wait time.Duration
}

// ErrAgentDown: nothing answers on the socket.
var ErrAgentDown = errors.New("netcube agent is not running")

func (a agent) client() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", a.socket)
		}},
	}
}

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
	c := a.client()
	for {
		req, _ := http.NewRequest(method, "http://agent"+path, bytes.NewReader(buf))
		resp, err := c.Do(req)
		if err == nil {
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
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

// NotifyPod tells the agent listening on socket that pod's network changed
// (as ADD does): it attaches the pod's programs and routes its addresses
// again. For tools that give a pod another address.
func NotifyPod(socket string, p Pod) error { return agent{socket: socket}.podAdded(p) }

func (a agent) status() error          { return a.call(http.MethodGet, "/v1/status", nil) }
func (a agent) podAdded(p Pod) error   { return a.call(http.MethodPut, "/v1/pods", p) }
func (a agent) podDeleted(p Pod) error { return a.call(http.MethodDelete, "/v1/pods", p) }
