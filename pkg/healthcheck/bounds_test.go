package healthcheck

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netcube/netcube/pkg/model"
)

// newServer returns a server listening on addrs, closed after the test
// (after the test's clients: cleanups run last registered first, and the
// unfixed server's Close waited for them).
func newServer(t *testing.T, addrs ...string) *Server {
	t.Helper()
	s := New()
	for _, a := range addrs {
		s.Addrs = append(s.Addrs, netip.MustParseAddr(a))
	}
	t.Cleanup(s.Close)
	return s
}

// probe sends one GET to host:port, as a load balancer's health check does.
func probe(host string, port uint16, timeout time.Duration) (answer, error) {
	var a answer
	c := http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + net.JoinHostPort(host, strconv.Itoa(int(port))) + "/")
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	a.status, a.weight = resp.StatusCode, resp.Header.Get("X-Load-Balancing-Endpoint-Weight")
	if err := json.NewDecoder(resp.Body).Decode(&a.body); err != nil {
		return a, fmt.Errorf("answer's body: %w", err)
	}
	return a, nil
}

// halfSent opens a connection to host:port and sends a request without
// the blank line that ends its headers: the server has read part of a
// request, which the client never finishes. Closed after the test.
func halfSent(t *testing.T, host string, port uint16) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(int(port))), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: probe\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// within fails the test unless f returns within d. f runs on; a test that
// fails here has its clients closed by cleanup, which frees it.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: not done %v after it began (a client's open request holds it)", what, d)
	}
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
}

// TestPortChangesDoNotWaitForClients: a client that holds a request
// half-sent on a Service's health-check port does not hold up the change
// that closes the port (the Service moves to another port, is deleted, or
// the agent stops): the change returns at once, well before the read
// timeout would have cut the client, and the Service answers on its new
// port.
func TestPortChangesDoNotWaitForClients(t *testing.T) {
	id := model.ServiceID{Namespace: "default", Name: "web"}
	for _, c := range []struct {
		name    string
		change  func(s *Server, newPort uint16) error
		answers bool // on newPort afterwards
	}{
		{"the Service moves to another port", func(s *Server, p uint16) error { return s.Set(id, p, 1) }, true},
		{"the Service is deleted", func(s *Server, _ uint16) error { s.Delete(id); return nil }, false},
		{"the server closes", func(s *Server, _ uint16) error { s.Close(); return nil }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t)
			port, newPort := freePort(t), freePort(t)
			if err := s.Set(id, port, 1); err != nil {
				t.Fatal(err)
			}
			if a, err := probe("127.0.0.1", port, time.Second); err != nil || a.status != 200 {
				t.Fatalf("control: the port does not answer: %+v, %v", a, err)
			}
			halfSent(t, "127.0.0.1", port)
			time.Sleep(100 * time.Millisecond) // the server reads the request's start
			var err error
			within(t, readTimeout/4, c.name, func() { err = c.change(s, newPort) })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := probe("127.0.0.1", port, time.Second); err == nil {
				t.Errorf("the old port %d still answers", port)
			}
			a, err := probe("127.0.0.1", newPort, time.Second)
			if answered := err == nil && a.status == 200; answered != c.answers {
				t.Errorf("new port %d: %+v, %v; want answered %v", newPort, a, err, c.answers)
			}
		})
	}
}

// TestConnectionCap: one address serves at most maxConnsPerAddress
// connections at once. With that many clients holding requests open, a
// new client waits (in the kernel's queue) until one ends, then is
// answered; another address of the node answers meanwhile.
func TestConnectionCap(t *testing.T) {
	s := newServer(t, "127.0.0.2", "127.0.0.3")
	id := model.ServiceID{Namespace: "default", Name: "web"}
	port := freePort(t)
	if err := s.Set(id, port, 1); err != nil {
		t.Fatal(err)
	}
	if a, err := probe("127.0.0.2", port, time.Second); err != nil || a.status != 200 {
		t.Fatalf("control: %+v, %v", a, err)
	}
	var held []net.Conn
	for range maxConnsPerAddress {
		held = append(held, halfSent(t, "127.0.0.2", port))
	}
	waiting := make(chan error, 1)
	go func() { _, err := probe("127.0.0.2", port, 3*time.Second); waiting <- err }()
	select {
	case err := <-waiting:
		t.Fatalf("a client beyond the cap of %d was served at once (err %v)", maxConnsPerAddress, err)
	case <-time.After(500 * time.Millisecond):
	}
	if a, err := probe("127.0.0.3", port, time.Second); err != nil || a.status != 200 {
		t.Errorf("the other address, with the first one full: %+v, %v", a, err)
	}
	held[0].Close()
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatalf("the waiting client, once a held one closed: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the waiting client was not served after a held connection closed")
	}
}

// TestTimeoutsCloseSlowClients: what a load balancer's probe never does
// ends the connection: headers that never finish, a connection that sends
// nothing, a second request on one connection (keep-alives are off), a
// request larger than maxHeaderBytes (431). A well-formed probe is the
// control.
func TestTimeoutsCloseSlowClients(t *testing.T) {
	s := newServer(t)
	id := model.ServiceID{Namespace: "default", Name: "web"}
	port := freePort(t)
	if err := s.Set(id, port, 1); err != nil {
		t.Fatal(err)
	}
	if a, err := probe("127.0.0.1", port, time.Second); err != nil || a.status != 200 {
		t.Fatalf("control: %+v, %v", a, err)
	}
	const grace = time.Second // beyond readTimeout: scheduling
	for _, c := range []struct {
		name string
		// client talks on conn and says what went wrong (nil: the
		// server behaved).
		client func(conn net.Conn) error
	}{
		{"headers dribbled a byte at a time", func(conn net.Conn) error {
			if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: probe\r\n"); err != nil {
				return err
			}
			start := time.Now()
			for time.Since(start) < readTimeout+grace {
				if _, err := io.WriteString(conn, "X"); err != nil {
					return nil // cut
				}
				if closedWithin(conn, 200*time.Millisecond) {
					return nil
				}
			}
			return fmt.Errorf("still open %v after the request began", time.Since(start).Round(time.Millisecond))
		}},
		{"a connection that sends nothing", func(conn net.Conn) error {
			if !closedWithin(conn, readTimeout+grace) {
				return fmt.Errorf("still open %v after it was opened", readTimeout+grace)
			}
			return nil
		}},
		{"a second request on one connection", func(conn net.Conn) error {
			r := bufio.NewReader(conn)
			for i := range 2 {
				if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: probe\r\n\r\n"); err != nil {
					if i == 1 {
						return nil
					}
					return err
				}
				_ = conn.SetReadDeadline(time.Now().Add(time.Second))
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					if i == 1 {
						return nil
					}
					return err
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return errors.New("the second request was answered: keep-alives are on")
		}},
		{"headers over 4 KiB", func(conn net.Conn) error {
			big := "GET / HTTP/1.1\r\nHost: probe\r\nX-Pad: " + strings.Repeat("a", 2*maxHeaderBytes+4096) + "\r\n\r\n"
			go io.WriteString(conn, big) // the server may stop reading
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				return fmt.Errorf("no answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				return fmt.Errorf("answered %s, want 431", resp.Status)
			}
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := c.client(conn); err != nil {
				t.Error(err)
			}
		})
	}
}

// closedWithin says whether the server closed conn (EOF or a reset)
// within d.
func closedWithin(conn net.Conn, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	var b [512]byte
	for {
		_, err := conn.Read(b[:])
		if err == nil {
			continue
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

// TestAnswersWhileChanging: clients probe without pause while one
// Service's endpoint count changes and another Service moves between two
// ports. Every change completes, every answer is whole and consistent
// (status, weight header and body agree, and name the port's Service), and
// the steady Service's port answers every probe.
func TestAnswersWhileChanging(t *testing.T) {
	s := newServer(t)
	steady, moving := model.ServiceID{Namespace: "default", Name: "steady"}, model.ServiceID{Namespace: "default", Name: "moving"}
	pSteady, pA, pB := freePort(t), freePort(t), freePort(t)
	if err := s.Set(steady, pSteady, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(moving, pA, 1); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	answered := map[uint16]int{}
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				p, want := []uint16{pSteady, pA, pB}[(i+n)%3], moving
				if p == pSteady {
					want = steady
				}
				a, err := probe("127.0.0.1", p, 2*time.Second)
				mu.Lock()
				switch {
				case err != nil && p == pSteady:
					problems = append(problems, fmt.Sprintf("steady port: %v", err))
				case err != nil: // the moving Service's other port is closed
				case a.weight != strconv.Itoa(a.body.LocalEndpoints) || (a.status == 200) != (a.body.LocalEndpoints > 0) || a.body.Service.Name != want.Name:
					problems = append(problems, fmt.Sprintf("port %d: inconsistent answer %+v", p, a))
				default:
					answered[p]++
				}
				mu.Unlock()
			}
		}()
	}
	within(t, 10*time.Second, "200 changes under probes", func() {
		for i := range 100 {
			if err := s.Set(steady, pSteady, i%3); err != nil {
				t.Error(err)
			}
			if err := s.Set(moving, []uint16{pA, pB}[i%2], i%2); err != nil {
				t.Error(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	close(stop)
	wg.Wait()
	for _, p := range problems[:min(len(problems), 5)] {
		t.Error(p)
	}
	if answered[pSteady] == 0 || answered[pA]+answered[pB] == 0 {
		t.Errorf("answers by port: %v, want some on each Service's", answered)
	}
}

// TestListensOnTheNodesAddresses: a health-check port listens on the
// node's addresses only (kube-proxy's nodePortAddresses), not on every
// address of the node (here: loopback addresses stand for the node's);
// with none known, on every address.
func TestListensOnTheNodesAddresses(t *testing.T) {
	id := model.ServiceID{Namespace: "default", Name: "web"}
	for _, c := range []struct {
		name             string
		addrs            []string
		answers, refuses []string
	}{
		{"no address known: every address", nil, []string{"127.0.0.1", "127.0.0.2", "::1"}, nil},
		{"one IPv4 address", []string{"127.0.0.2"}, []string{"127.0.0.2"}, []string{"127.0.0.1", "::1"}},
		{"an address of each family", []string{"127.0.0.2", "::1"}, []string{"127.0.0.2", "::1"}, []string{"127.0.0.1", "127.0.0.3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, c.addrs...)
			port := freePort(t)
			if err := s.Set(id, port, 1); err != nil {
				t.Fatal(err)
			}
			for _, h := range c.answers {
				if a, err := probe(h, port, time.Second); err != nil || a.status != 200 {
					t.Errorf("%s: %+v, %v; want an answer", h, a, err)
				}
			}
			for _, h := range c.refuses {
				if _, err := probe(h, port, time.Second); err == nil {
					t.Errorf("%s answered; want refused", h)
				}
			}
		})
	}
}
