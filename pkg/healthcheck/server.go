// Package healthcheck serves kube-proxy's per-Service health checks: for
// each Service with externalTrafficPolicy Local and a healthCheckNodePort,
// an HTTP server on that port of this node answers 200 while the node has
// a ready endpoint of the Service and 503 otherwise, so that a load
// balancer in front of the cluster sends the Service's traffic only to
// nodes that can serve it (a node without one drops it).
package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"

	"github.com/netcube/netcube/pkg/model"
)

// Server runs one HTTP listener per health-check port. Its methods are safe
// for concurrent use.
type Server struct {
	// Mark, when not 0, is set (SO_MARK) on every listening socket before
	// it binds: socket-LB keeps the NodePort range, from which
	// health-check ports come, from every other socket on the node.
	Mark      uint32
	mu        sync.Mutex
	services  map[model.ServiceID]uint16 // the port of each Service
	listeners map[uint16]*listener
}

type listener struct {
	srv     *http.Server
	service model.ServiceID
	local   int // ready endpoints on this node
}

// mark sets Mark on a socket before it binds.
func (s *Server) mark(_, _ string, c syscall.RawConn) error {
	if s.Mark == 0 {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, int(s.Mark))
	}); err != nil {
		return err
	}
	return serr
}

// New returns a server with no ports open.
func New() *Server {
	return &Server{services: map[model.ServiceID]uint16{}, listeners: map[uint16]*listener{}}
}

// Set makes port answer for Service id, which has local ready endpoints on
// this node; a Service moving to another port leaves its old one.
func (s *Server) Set(id model.ServiceID, port uint16, local int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.services[id]; ok && old != port {
		s.closeLocked(id)
	}
	if l := s.listeners[port]; l != nil {
		if l.service != id {
			return fmt.Errorf("health-check port %d is already served for %s", port, l.service)
		}
		l.local = local
		return nil
	}
	lc := net.ListenConfig{Control: s.mark}
	ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort("", strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("health-check port %d of %s: %w", port, id, err)
	}
	l := &listener{service: id, local: local}
	l.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { s.answer(w, port) })}
	s.listeners[port], s.services[id] = l, port
	go func() {
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("health-check server", "port", port, "service", id, "err", err)
		}
	}()
	return nil
}

// Delete closes Service id's port, if it has one.
func (s *Server) Delete(id model.ServiceID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked(id)
}

func (s *Server) closeLocked(id model.ServiceID) {
	port, ok := s.services[id]
	if !ok {
		return
	}
	_ = s.listeners[port].srv.Shutdown(context.Background())
	delete(s.listeners, port)
	delete(s.services, id)
}

// Close closes every port.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.services {
		s.closeLocked(id)
	}
}

// answer writes kube-proxy's health-check response.
func (s *Server) answer(w http.ResponseWriter, port uint16) {
	s.mu.Lock()
	l := s.listeners[port]
	var id model.ServiceID
	local := 0
	if l != nil {
		id, local = l.service, l.local
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(local))
	if local == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	body := struct {
		Service struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"service"`
		LocalEndpoints      int  `json:"localEndpoints"`
		ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
	}{LocalEndpoints: local, ServiceProxyHealthy: true}
	body.Service.Namespace, body.Service.Name = id.Namespace, id.Name
	_ = json.NewEncoder(w).Encode(body)
}
