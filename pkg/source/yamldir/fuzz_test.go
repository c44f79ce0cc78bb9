package yamldir

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/pkg/model"
)

// FuzzManifests: any manifest file (mutated from valid Services,
// EndpointSlices, Nodes, Pods, Namespaces and NetworkPolicies, and
// invalid ones) parses without a panic, and what it yields is what the
// datapath can hold: every converted object valid (valid addresses,
// ports 1-65535, TCP, UDP or SCTP), an invalid one always with its error,
// and the same file always giving the same answer. `make test` runs the
// seeds and a short fuzzing; `go test ./pkg/source/yamldir -run '^$'
// -fuzz FuzzManifests` a long one.
func FuzzManifests(f *testing.F) {
	for _, seed := range []string{
		svcYAML("a", "10.96.0.1"),
		sliceYAML,
		nsYAML + "---\n" + podYAML,
		policyYAML("web", "{podSelector: {matchLabels: {app: shop}}}, {ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}"),
		"apiVersion: v1\nkind: Service\nmetadata: {name: lb}\nspec:\n  type: LoadBalancer\n  clusterIPs: [10.96.0.2, \"fd00::2\"]\n" +
			"  externalIPs: [192.0.2.1]\n  loadBalancerSourceRanges: [10.0.0.0/8]\n  ports: [{port: 80, nodePort: 30080, protocol: UDP}]\n" +
			"status: {loadBalancer: {ingress: [{ip: 192.0.2.9}]}}\n",
		"apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {podCIDRs: [10.244.1.0/24, \"fd00:10:244:1::/64\"]}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {clusterIP: 10.96.0.300, ports: [{port: 70000}]}\n",
		"{\"apiVersion\": \"v1\", \"kind\": \"Service\", \"metadata\": {\"name\": \"j\"}, \"spec\": {\"clusterIP\": \"None\"}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseFile(data)
		if err != nil {
			return // the whole file refused: named by the caller, nothing applied
		}
		again, err := parseFile(data)
		if err != nil || len(again.objs) != len(p.objs) || len(again.invalid) != len(p.invalid) {
			t.Fatalf("parsing the same file twice differs: %d/%d objects, %d/%d invalid, %v",
				len(p.objs), len(again.objs), len(p.invalid), len(again.invalid), err)
		}
		for k, o := range p.objs {
			if k.Name == "" && p.invalid[k] == nil {
				t.Errorf("%s: no name, and no error", k)
			}
			checkObject(t, k, o)
		}
	})
}

func validPort(p uint16, proto model.Proto) bool {
	return p != 0 && (proto == model.TCP || proto == model.UDP || proto == model.SCTP)
}

// checkObject fails t if o holds what the datapath cannot.
func checkObject(t *testing.T, k objKey, o object) {
	t.Helper()
	if s := o.svc; s != nil {
		for _, a := range s.ClusterIPs() {
			if !a.IsValid() {
				t.Errorf("%s: invalid cluster IP", k)
			}
		}
		for _, p := range s.Ports() {
			if !validPort(p.Port, p.Proto) {
				t.Errorf("%s: port %+v", k, p)
			}
		}
		if e := s.External; e != nil {
			for _, a := range append(append([]netip.Addr{}, e.IPs...), e.LoadBalancerIPs...) {
				if !a.IsValid() {
					t.Errorf("%s: invalid external address", k)
				}
			}
		}
	}
	if s := o.slice; s != nil {
		for _, p := range s.Ports() {
			if !validPort(p.Port, p.Proto) {
				t.Errorf("%s: endpoint port %+v", k, p)
			}
		}
		for i := range s.Endpoints {
			if a := s.Addr(&s.Endpoints[i]); !a.IsValid() || a.Is6() != s.IPv6() {
				t.Errorf("%s: endpoint %v in a slice of IPv6=%v", k, a, s.IPv6())
			}
		}
	}
	if n := o.node; n != nil {
		for _, c := range n.PodCIDRs {
			if !c.IsValid() {
				t.Errorf("%s: invalid pod CIDR", k)
			}
		}
	}
	if p := o.pod; p != nil {
		for _, a := range p.IPs {
			if !a.IsValid() {
				t.Errorf("%s: invalid pod IP", k)
			}
		}
		for _, np := range p.Ports {
			if np.Name == "" || !validPort(np.Port, np.Proto) {
				t.Errorf("%s: named port %+v", k, np)
			}
		}
	}
	if pol := o.policy; pol != nil {
		if pol.Pods == nil {
			t.Errorf("%s: a policy without a pod selector", k)
		}
		for _, rules := range [][]model.PolicyRule{pol.Ingress, pol.Egress} {
			for _, r := range rules {
				for _, peer := range r.Peers {
					if b := peer.Block; b != nil {
						for _, e := range b.Except {
							if !b.CIDR.Contains(e.Addr()) || e.Bits() <= b.CIDR.Bits() {
								t.Errorf("%s: except %v not strictly inside %v", k, e, b.CIDR)
							}
						}
					}
				}
				for _, port := range r.Ports {
					if port.Proto != model.TCP && port.Proto != model.UDP && port.Proto != model.SCTP {
						t.Errorf("%s: policy port %+v", k, port)
					}
					if port.EndPort != 0 && port.EndPort < port.Port {
						t.Errorf("%s: policy port range %+v", k, port)
					}
				}
			}
		}
	}
}
