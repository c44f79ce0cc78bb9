// Package cnisocket is the agent's side of the CNI plugin's socket: an
// HTTP server on a unix socket that answers the plugin's status, pod
// added and pod deleted calls (pkg/cni is the plugin and its client).
//
// It is a package of its own so that the plugin binary, which a runtime
// starts for every pod, does not link net/http's server and client: their
// initialization is a measurable part of a short-lived process's start
// (docs/benchmarks/podnet-profile/).
package cnisocket

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/netcube/netcube/pkg/cni"
)

// AgentHandler is the agent's side: what it does when the plugin calls.
type AgentHandler interface {
	// Ready: nil once the agent can attach pods (its datapath loaded).
	Ready() error
	// PodAdded attaches the pod's programs; ADD fails if it fails.
	PodAdded(cni.Pod) error
	// PodDeleted forgets the pod (its links went with its veth).
	PodDeleted(cni.Pod) error
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
	mux.HandleFunc("GET "+cni.PathStatus, func(w http.ResponseWriter, _ *http.Request) {
		if err := h.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	pod := func(f func(cni.Pod) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var p cni.Pod
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
	mux.HandleFunc("PUT "+cni.PathPods, pod(h.PodAdded))
	mux.HandleFunc("DELETE "+cni.PathPods, pod(h.PodDeleted))
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
