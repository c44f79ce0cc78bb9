package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
)

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
