package lbipam

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// TestPoolGuardServesPoolAddressesOnly: a LoadBalancer Service whose
// status holds one address in a pool and one outside every pool reaches
// the handler with the pool's address alone (the positive control: the
// pool's address is served), and the other named in an Event; a pool
// that comes to hold the other address makes it served, and its removal
// takes it away again; a Service with no ingress passes untouched.
func TestPoolGuardServesPoolAddressesOnly(t *testing.T) {
	got := map[types.NamespacedName]*model.Service{}
	sink := &events{}
	rep := report.New()
	rep.Sink = sink
	g := &PoolGuard{Report: rep, Next: func(k types.NamespacedName, s *model.Service) { got[k] = s }}
	g.SetPools([]netip.Prefix{netip.MustParsePrefix("192.0.2.0/28")})
	api := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lb"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "192.0.2.5"}, {IP: "198.51.100.7"}}}}}
	svc, err := k8s.ToService(api)
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "default", Name: "lb"}
	served := func() []string {
		var out []string
		if s := got[key]; s != nil && s.External != nil {
			for _, a := range s.External.LoadBalancerIPs {
				out = append(out, a.String())
			}
		}
		return out
	}
	g.OnService(key, svc)
	if s := served(); !slices.Equal(s, []string{"192.0.2.5"}) {
		t.Errorf("served %v, want the pool's 192.0.2.5 alone", s)
	}
	if len(svc.External.LoadBalancerIPs) != 2 {
		t.Errorf("the source's Service was changed: %v", svc.External.LoadBalancerIPs)
	}
	if msg := sink.last(report.IngressOutsidePools); !strings.Contains(msg, "198.51.100.7 in no NetworkLoadBalancerPool") {
		t.Errorf("the address outside the pools is not named in an Event: %q", msg)
	}
	g.SetPools([]netip.Prefix{netip.MustParsePrefix("192.0.2.0/28"), netip.MustParsePrefix("198.51.100.0/24")})
	if s := served(); !slices.Equal(s, []string{"192.0.2.5", "198.51.100.7"}) {
		t.Errorf("after a pool holding it was made: served %v, want both", s)
	}
	if n := rep.Count()[report.IngressOutsidePools]; n != 0 {
		t.Errorf("%d IngressOutsidePools problems stand with every address in a pool", n)
	}
	g.SetPools(nil)
	if s := served(); len(s) != 0 {
		t.Errorf("with no pool: served %v, want none", s)
	}
	if s := got[key]; s == nil || s.External == nil || len(s.External.LoadBalancerIPs) != 0 || s.Ports()[0].NodePort != 30080 {
		t.Errorf("with no pool the Service keeps its NodePort: %+v", s)
	}
	plain := &model.Service{ID: model.ServiceID{Namespace: "default", Name: "plain"}}
	g.OnService(types.NamespacedName{Namespace: "default", Name: "plain"}, plain)
	if got[types.NamespacedName{Namespace: "default", Name: "plain"}] != plain {
		t.Error("a Service without ingress addresses is not passed on as it is")
	}
	foreign := *svc
	ext := *svc.External
	ext.ForeignLoadBalancer = true
	foreign.External = &ext
	fkey := types.NamespacedName{Namespace: "default", Name: "metallb"}
	g.OnService(fkey, &foreign)
	if got[fkey] != &foreign {
		t.Error("a Service of another loadBalancerClass is not passed on as it is (its controller's addresses)")
	}
	g.OnService(key, nil)
	if s, ok := got[key]; !ok || s != nil {
		t.Error("a deleted Service is not passed on as deleted")
	}
}

type events struct{ msgs map[report.Reason]string }

func (e *events) Warn(_ report.Object, reason report.Reason, msg string) {
	if e.msgs == nil {
		e.msgs = map[report.Reason]string{}
	}
	e.msgs[reason] = msg
}

func (e *events) last(r report.Reason) string { return e.msgs[r] }
