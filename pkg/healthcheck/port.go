package healthcheck

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/netcube/netcube/pkg/model"
)

// port is one health-check port: its Service, fixed for the port's life,
// and the Service's ready endpoints on this node, which the answer reads
// atomically (a request takes no lock the Server's methods hold).
type port struct {
	service model.ServiceID
	local   atomic.Int64
	srv     *http.Server
	// lns are srv's listeners, closed here too: srv.Close knows only
	// those its Serve goroutines have begun on, and a Service that moves
	// back at once must find its old port free.
	lns []net.Listener
}

// close stops the port's server: its listeners and every connection, at
// once (http.Server.Close, not Shutdown, which would wait for a client
// that never finishes its request). A nil port is nothing to close.
func (p *port) close() {
	if p == nil {
		return
	}
	_ = p.srv.Close()
	for _, ln := range p.lns {
		_ = ln.Close()
	}
}

// ServeHTTP writes kube-proxy's health-check response.
func (p *port) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	local := int(p.local.Load())
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
	body.Service.Namespace, body.Service.Name = p.service.Namespace, p.service.Name
	_ = json.NewEncoder(w).Encode(body)
}
