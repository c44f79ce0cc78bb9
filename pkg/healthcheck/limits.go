package healthcheck

import (
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// The bounds of a health-check port. Its answer is a few hundred bytes to
// a load balancer's probe, which sends one short request and waits a few
// seconds at most: anything slower or larger is not a probe, and must not
// hold the agent's sockets, memory or goroutines.
const (
	// readTimeout is the time a client has to send its whole request,
	// headers included, from the connection's accept: a client that
	// dribbles its headers (slowloris) is cut after it.
	readTimeout = 2 * time.Second
	// writeTimeout is the time a client has to read the answer.
	writeTimeout = 2 * time.Second
	// idleTimeout bounds a connection between requests; keep-alives are
	// off (each answer closes its connection), so it is a backstop.
	idleTimeout = 2 * time.Second
	// maxHeaderBytes bounds the request line and headers; a larger
	// request is answered 431.
	maxHeaderBytes = 4 << 10
	// maxConnsPerAddress is how many connections one listening address
	// serves at once; more wait in the kernel's accept queue until one
	// ends (within the timeouts above), so a flood of clients costs the
	// agent at most this many connections per address.
	maxConnsPerAddress = 64
)

// newHTTPServer returns an HTTP server for one health-check port, with the
// bounds above.
func newHTTPServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:        h,
		ReadTimeout:    readTimeout,
		WriteTimeout:   writeTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
	}
	srv.SetKeepAlivesEnabled(false)
	return srv
}

// limit caps the connections one listening socket serves at once.
func limit(ln net.Listener) net.Listener { return netutil.LimitListener(ln, maxConnsPerAddress) }
