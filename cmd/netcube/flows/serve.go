package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// checkLoopback refuses a --serve address that is not the machine's own:
// the page shows the cluster's traffic to whoever reaches it (reach it
// from elsewhere through ssh -L or kubectl port-forward).
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--serve %q: want 127.0.0.1:PORT: %v", addr, err)
	}
	if port == "" {
		return fmt.Errorf("--serve %q: no port: want 127.0.0.1:PORT", addr)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--serve %q: not a loopback address: the page shows the cluster's flows to whoever reaches it (serve on 127.0.0.1 and reach it through ssh -L)", addr)
	}
	return nil
}

// serveUntil serves the page, drawn from the server's flows anew on each
// load, at o.serve until ctx ends: / (the page), /map.svg, /graph.json.
func (o *options) serveUntil(ctx context.Context, log io.Writer) error {
	ln, err := net.Listen("tcp", o.serve)
	if err != nil {
		return fmt.Errorf("--serve %s: %w", o.serve, err)
	}
	// A first map before serving: a server that does not answer is told now.
	if _, err := o.graph(ctx); err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	draw := func(w http.ResponseWriter, r *http.Request) (Graph, bool) {
		g, err := o.graph(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return g, false
		}
		return g, true
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if g, ok := draw(w, r); ok {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_ = HTML(w, g, o.srv.addr, o.refresh)
		}
	})
	mux.HandleFunc("GET /map.svg", func(w http.ResponseWriter, r *http.Request) {
		if g, ok := draw(w, r); ok {
			w.Header().Set("Content-Type", "image/svg+xml")
			_, _ = io.WriteString(w, SVG(g))
		}
	})
	mux.HandleFunc("GET /graph.json", func(w http.ResponseWriter, r *http.Request) {
		if g, ok := draw(w, r); ok {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(g)
		}
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(log, "Serving the flows map of %s at http://%s/ (Ctrl-C to stop)\n", o.srv.addr, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
