// Package healthcheck serves kube-proxy's per-Service health checks: for
// each Service with externalTrafficPolicy Local and a healthCheckNodePort,
// an HTTP server on that port of this node answers 200 while the node has
// a ready endpoint of the Service and 503 otherwise, so that a load
// balancer in front of the cluster sends the Service's traffic only to
// nodes that can serve it (a node without one drops it).
//
// The ports are open to anyone who reaches the node, and the load-balancer
// cube's worker opens and closes them: no client may hold that worker up.
// A port is closed outside the server's lock and without waiting for its
// clients, the answer reads its port's state without a shared lock, and
// every port has timeouts and a connection cap (limits.go).
package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"syscall"

	"github.com/netcube/netcube/pkg/model"
)

// Server runs one HTTP server per health-check port. Its methods are safe
// for concurrent use; none waits for a client.
type Server struct {
	// Mark, when not 0, is set (SO_MARK) on every listening socket before
	// it binds: socket-LB keeps the NodePort range, from which
	// health-check ports come, from every other socket on the node.
	Mark uint32
	// Addrs are the addresses a port listens on: the node's NodePort
	// addresses, as kube-proxy binds its health checks to its
	// nodePortAddresses. Empty: every address of the node (an agent that
	// knows no address of its own, such as one with --node-ifaces none,
	// still answers, as kube-proxy does without nodePortAddresses). Set
	// before the first Set.
	Addrs    []netip.Addr
	mu       sync.Mutex
	services map[model.ServiceID]uint16 // the port of each Service
	ports    map[uint16]*port
}

// New returns a server with no ports open.
func New() *Server {
	return &Server{services: map[model.ServiceID]uint16{}, ports: map[uint16]*port{}}
}

// Set makes port answer for Service id, which has local ready endpoints on
// this node; a Service moving to another port leaves its old one.
func (s *Server) Set(id model.ServiceID, port uint16, local int) error {
	stale, err := s.set(id, port, local)
	stale.close()
	return err
}

// set does Set's work under the lock and returns the port the Service
// left, for the caller to close once the lock is released.
func (s *Server) set(id model.ServiceID, number uint16, local int) (stale *port, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.services[id]; ok && old != number {
		stale = s.detachLocked(id)
	}
	if p := s.ports[number]; p != nil {
		if p.service != id {
			return stale, fmt.Errorf("health-check port %d is already served for %s", number, p.service)
		}
		p.local.Store(int64(local))
		return stale, nil
	}
	p, err := s.open(id, number, local)
	if err != nil {
		return stale, err
	}
	s.ports[number], s.services[id] = p, number
	return stale, nil
}

// Delete closes Service id's port, if it has one.
func (s *Server) Delete(id model.ServiceID) {
	s.mu.Lock()
	stale := s.detachLocked(id)
	s.mu.Unlock()
	stale.close()
}

// Close closes every port.
func (s *Server) Close() {
	s.mu.Lock()
	var stale []*port
	for id := range s.services {
		stale = append(stale, s.detachLocked(id))
	}
	s.mu.Unlock()
	for _, p := range stale {
		p.close()
	}
}

// detachLocked takes Service id's port out of the maps and returns it (nil:
// it has none); s.mu is held.
func (s *Server) detachLocked(id model.ServiceID) *port {
	number, ok := s.services[id]
	if !ok {
		return nil
	}
	p := s.ports[number]
	delete(s.ports, number)
	delete(s.services, id)
	return p
}

// open listens on number on each of s.Addrs (every address if none) and
// serves Service id's answer there.
func (s *Server) open(id model.ServiceID, number uint16, local int) (*port, error) {
	hosts := []string{""}
	if len(s.Addrs) > 0 {
		hosts = hosts[:0]
		for _, a := range s.Addrs {
			hosts = append(hosts, a.String())
		}
	}
	lc := net.ListenConfig{Control: s.mark}
	var lns []net.Listener
	for _, h := range hosts {
		ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(h, strconv.Itoa(int(number))))
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("health-check port %d of %s: %w", number, id, err)
		}
		lns = append(lns, limit(ln))
	}
	p := &port{service: id, lns: lns}
	p.local.Store(int64(local))
	p.srv = newHTTPServer(p)
	for _, ln := range lns {
		go func() {
			if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				slog.Error("health-check server", "port", number, "address", ln.Addr(), "service", id, "err", err)
			}
		}()
	}
	return p, nil
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
