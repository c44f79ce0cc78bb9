package healthcheck

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/netcube/netcube/pkg/model"
)

func freePort(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

type answer struct {
	status int
	weight string
	body   struct {
		Service             struct{ Namespace, Name string }
		LocalEndpoints      int
		ServiceProxyHealthy bool
	}
}

func get(t *testing.T, port uint16) (answer, error) {
	t.Helper()
	var a answer
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	a.status, a.weight = resp.StatusCode, resp.Header.Get("X-Load-Balancing-Endpoint-Weight")
	if err := json.NewDecoder(resp.Body).Decode(&a.body); err != nil {
		t.Fatal(err)
	}
	return a, nil
}

// TestHealthCheck: kube-proxy's answers on a Service's health-check port:
// 200 with the local endpoint count while there is one, 503 without; the
// port follows the Service and closes with it.
func TestHealthCheck(t *testing.T) {
	s := New()
	defer s.Close()
	id := model.ServiceID{Namespace: "default", Name: "web"}
	port, port2 := freePort(t), freePort(t)

	if err := s.Set(id, port, 2); err != nil {
		t.Fatal(err)
	}
	a, err := get(t, port)
	if err != nil || a.status != 200 || a.weight != "2" || a.body.LocalEndpoints != 2 || a.body.Service.Name != "web" || !a.body.ServiceProxyHealthy {
		t.Fatalf("two local endpoints: %+v, %v", a, err)
	}
	if err := s.Set(id, port, 0); err != nil {
		t.Fatal(err)
	}
	if a, err := get(t, port); err != nil || a.status != 503 || a.body.LocalEndpoints != 0 {
		t.Fatalf("no local endpoint: %+v, %v", a, err)
	}
	if err := s.Set(model.ServiceID{Namespace: "default", Name: "other"}, port, 1); err == nil {
		t.Error("a second Service was given the same port")
	}
	if err := s.Set(id, port2, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, port); err == nil {
		t.Error("the old port still answers after the Service moved")
	}
	if a, err := get(t, port2); err != nil || a.status != 200 {
		t.Fatalf("new port: %+v, %v", a, err)
	}
	s.Delete(id)
	if _, err := get(t, port2); err == nil {
		t.Error("the port still answers after the Service was deleted")
	}
}
