package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/localapi"
)

// policyHealth is the policy cube's side of /readyz and `netcube status`:
// whether its first sync is written, and what it could not write.
type policyHealth interface {
	PolicySynced() <-chan struct{}
	PolicyFailures() map[string]error
	PoliciesNotApplied() map[string]string
}

// failures are the Service reconciler's failures and the policy cube's
// (ph may be nil), by object.
func failures(rec cube.Reconciler, ph policyHealth) map[string]error {
	f := maps.Clone(rec.Failures())
	if ph == nil {
		return f
	}
	for id, err := range ph.PolicyFailures() {
		if f == nil {
			f = map[string]error{}
		}
		f[id] = err
	}
	return f
}

func statusHandler(node string, started time.Time, m *metrics, rec cube.Reconciler, ph policyHealth) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := localapi.Status{Node: node, Started: started, LastSync: m.lastSync()}
		select {
		case <-rec.Synced():
			st.Synced = true
		default:
		}
		if ph != nil {
			synced := false
			select {
			case <-ph.PolicySynced():
				synced = true
			default:
			}
			st.PolicySynced = &synced
			if na := ph.PoliciesNotApplied(); len(na) > 0 {
				st.NotApplied = na
			}
		}
		for id, err := range failures(rec, ph) {
			if st.Failing == nil {
				st.Failing = map[string]string{}
			}
			st.Failing[id] = err.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
}

// serveAPI serves the cubes' paths of the local API on a unix socket
// (root only: it shows every flow of the node) until ctx ends. The socket
// exists only while an agent serves it.
func serveAPI(ctx context.Context, socket string, paths map[string]http.Handler) error {
	if socket == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return fmt.Errorf("--api-socket: %w", err)
	}
	_ = os.Remove(socket) // a previous agent's
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("--api-socket: %w", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("--api-socket: %w", err)
	}
	mux := http.NewServeMux()
	for path, h := range paths {
		mux.Handle("GET "+path, h)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
		_ = os.Remove(socket)
	}()
	slog.Info("serving the local API", "socket", socket)
	return nil
}
