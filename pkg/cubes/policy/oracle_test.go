package policy_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/mattfenwick/cyclonus/pkg/connectivity"
	"github.com/mattfenwick/cyclonus/pkg/connectivity/probe"
	"github.com/mattfenwick/cyclonus/pkg/generator"
	"github.com/mattfenwick/cyclonus/pkg/kube"
	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
)

// TestCyclonusOracle runs every test case cyclonus generates (its
// conformance suite for NetworkPolicy: 3 namespaces of 3 pods serving
// ports 80 and 81 over TCP, UDP and SCTP; policies, label changes,
// namespace and pod churn) through cyclonus's own interpreter, with the
// "cluster" answering each probe from netcube's compiled tables
// (Tables.Allows, which evaluates them as the datapath's lookups do) and
// cyclonus's matcher, an independent model of the API, giving the
// expected answer. Every probe of every case must agree.
func TestCyclonusOracle(t *testing.T) {
	t.Run("tables", func(t *testing.T) { runCyclonus(t, newOracleKube(t, nil)) })
	// The same cases with every probe a packet through the datapath's
	// programs (BPF_PROG_RUN): the sender's from_pod, the receiver's
	// to_pod, the tables written into the maps as the agent writes them.
	t.Run("datapath", func(t *testing.T) {
		testenv.RequireRoot(t)
		dp, err := loadTrusting(datapath.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dp.Close() })
		runCyclonus(t, newOracleKube(t, dp))
	})
}

func runCyclonus(t *testing.T, cluster *oracleKube) {
	logrus.SetLevel(logrus.WarnLevel)
	namespaces := []string{"x", "y", "z"}
	resources, err := probe.NewDefaultResources(cluster, namespaces, []string{"a", "b", "c"}, []int{80, 81},
		[]v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}, nil, 10, false, "registry.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	xa, err := resources.GetPod("x", "a")
	if err != nil {
		t.Fatal(err)
	}
	// Positive control: with no policy every probe connects.
	for _, p := range resources.Pods {
		for _, q := range resources.Pods {
			cmd := []string{"/agnhost", "connect", net.JoinHostPort(q.IP, "80"), "--timeout=1s", "--protocol=udp"}
			if _, _, blocked, err := cluster.ExecuteRemoteCommand(p.Namespace, p.Name, "c", cmd); err != nil || blocked != nil {
				t.Fatalf("no policy: %s/%s -> %s/%s: %v %v", p.Namespace, p.Name, q.Namespace, q.Name, blocked, err)
			}
		}
	}
	cases := generator.NewTestCaseGenerator(false, xa.IP, namespaces, nil, nil).GenerateTestCases()
	if len(cases) < 200 {
		t.Fatalf("cyclonus generated %d cases; expected its full suite (about 230)", len(cases))
	}
	interpreter := connectivity.NewInterpreter(cluster, resources, &connectivity.InterpreterConfig{
		ResetClusterBeforeTestCase: true, IgnoreLoopback: true, JobTimeoutSeconds: 1,
	})
	var results []*connectivity.Result
	for _, c := range cases {
		r := interpreter.ExecuteTestCase(c)
		if r.Err != nil {
			t.Fatalf("case %q: %v", c.Description, r.Err)
		}
		results = append(results, r)
		if !r.Passed(true) {
			t.Errorf("case %q differs from cyclonus's matcher:\n%s", c.Description, describeFailure(r))
		}
	}
	summary := connectivity.NewSummaryTableFromResults(true, results)
	t.Logf("cyclonus cases: %d passed, %d failed", summary.Passed, summary.Failed)
}

func describeFailure(r *connectivity.Result) string {
	var b strings.Builder
	for i, s := range r.Steps {
		if s.Passed(true) {
			continue
		}
		fmt.Fprintf(&b, "step %d: policies\n", i+1)
		for _, p := range s.KubePolicies {
			b.WriteString(connectivity.PrintNetworkPolicy(p))
		}
		b.WriteString(s.LastComparison().RenderSuccessTable())
	}
	return b.String()
}

// oracleKube is cyclonus's in-memory Kubernetes whose probes are answered
// by netcube's policy tables, recompiled whenever the objects change.
type oracleKube struct {
	*kube.MockKubernetes
	t        *testing.T
	mu       sync.Mutex
	version  int
	compiled int
	compiler *policy.Compiler
	cl       *policy.Cluster // what the compiler was given
	tables   *policy.Tables
	dp       *datapath.Datapath // nil: answer from the tables alone
	sport    uint16             // a new source port per datapath probe
}

func newOracleKube(t *testing.T, dp *datapath.Datapath) *oracleKube {
	return &oracleKube{MockKubernetes: kube.NewMockKubernetes(1), t: t, compiler: policy.NewCompiler(), compiled: -1,
		dp: dp, sport: 20000}
}

func (o *oracleKube) changed() {
	o.mu.Lock()
	o.version++
	o.mu.Unlock()
}

func (o *oracleKube) CreateNamespace(ns *v1.Namespace) (*v1.Namespace, error) {
	defer o.changed()
	return o.MockKubernetes.CreateNamespace(ns)
}

// SetNamespaceLabels stores the labels: the mock's own changes a copy only.
func (o *oracleKube) SetNamespaceLabels(ns string, l map[string]string) (*v1.Namespace, error) {
	defer o.changed()
	mns, ok := o.MockKubernetes.Namespaces[ns]
	if !ok {
		return nil, fmt.Errorf("namespace %s not found", ns)
	}
	mns.NamespaceObject.Labels = l
	return o.MockKubernetes.GetNamespace(ns)
}

func (o *oracleKube) DeleteNamespace(ns string) error {
	defer o.changed()
	return o.MockKubernetes.DeleteNamespace(ns)
}

func (o *oracleKube) CreateNetworkPolicy(p *networkingv1.NetworkPolicy) (*networkingv1.NetworkPolicy, error) {
	defer o.changed()
	return o.MockKubernetes.CreateNetworkPolicy(p)
}

func (o *oracleKube) UpdateNetworkPolicy(p *networkingv1.NetworkPolicy) (*networkingv1.NetworkPolicy, error) {
	defer o.changed()
	return o.MockKubernetes.UpdateNetworkPolicy(p)
}

func (o *oracleKube) DeleteNetworkPolicy(ns, name string) error {
	defer o.changed()
	return o.MockKubernetes.DeleteNetworkPolicy(ns, name)
}

func (o *oracleKube) DeleteAllNetworkPoliciesInNamespace(ns string) error {
	defer o.changed()
	return o.MockKubernetes.DeleteAllNetworkPoliciesInNamespace(ns)
}

func (o *oracleKube) CreatePod(p *v1.Pod) (*v1.Pod, error) {
	defer o.changed()
	return o.MockKubernetes.CreatePod(p)
}

func (o *oracleKube) DeletePod(ns, name string) error {
	defer o.changed()
	return o.MockKubernetes.DeletePod(ns, name)
}

func (o *oracleKube) SetPodLabels(ns, name string, l map[string]string) (*v1.Pod, error) {
	defer o.changed()
	return o.MockKubernetes.SetPodLabels(ns, name, l)
}

// current compiles the objects into one node's tables (every pod local),
// as the agent converts them from the API: whole the first time, then, as
// the agent does, by Compiler.Update with the objects that changed.
func (o *oracleKube) current() (*policy.Tables, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.compiled == o.version {
		return o.tables, nil
	}
	cl := policy.NewCluster()
	nss, err := o.MockKubernetes.GetAllNamespaces()
	if err != nil {
		return nil, err
	}
	for _, ns := range nss.Items {
		cl.SetNamespace(ns.Name, k8s.ToNamespace(&ns))
		pods, err := o.MockKubernetes.GetPodsInNamespace(ns.Name)
		if err != nil {
			return nil, err
		}
		for i := range pods {
			p, err := k8s.ToPod(&pods[i])
			if err != nil {
				return nil, fmt.Errorf("pod %s/%s: %w", ns.Name, pods[i].Name, err)
			}
			if p != nil {
				cl.SetPod(p.ID, p)
			}
		}
		pols, err := o.MockKubernetes.GetNetworkPoliciesInNamespace(ns.Name)
		if err != nil {
			return nil, err
		}
		for i := range pols {
			p, err := k8s.ToPolicy(&pols[i])
			if err != nil {
				return nil, fmt.Errorf("policy %s/%s: %w", ns.Name, pols[i].Name, err)
			}
			cl.SetPolicy(p.ID, p)
		}
	}
	if o.cl == nil {
		o.cl = cl
		o.compiler.Compile(cl, func(*model.Pod) bool { return true }, nil)
	} else {
		o.compiler.Update(updateCluster(o.cl, cl))
	}
	if o.dp != nil {
		if err := policy.SyncChanges(o.dp.Maps(), o.compiler.Tables(), o.compiler.Changes()); err != nil {
			return nil, err
		}
	}
	o.tables, o.compiled = o.compiler.Tables(), o.version
	return o.tables, nil
}

// ExecuteRemoteCommand answers a probe, `/agnhost connect host:port
// --timeout=Ns --protocol=p`, from the tables: a command error is a
// blocked connection.
func (o *oracleKube) ExecuteRemoteCommand(ns, pod, container string, cmd []string) (string, string, error, error) {
	if len(cmd) != 5 || cmd[1] != "connect" {
		return "", "", nil, fmt.Errorf("unexpected probe command %q", cmd)
	}
	tables, err := o.current()
	if err != nil {
		return "", "", nil, err
	}
	from, err := o.MockKubernetes.GetPod(ns, pod)
	if err != nil {
		return "", "", nil, err
	}
	src, err := netip.ParseAddr(from.Status.PodIP)
	if err != nil {
		return "", "", nil, err
	}
	host, portStr, err := net.SplitHostPort(cmd[2])
	if err != nil {
		return "", "", nil, err
	}
	dst, err := o.resolve(host)
	if err != nil {
		return "", "", nil, err
	}
	var port uint16
	if _, err := fmt.Sscan(portStr, &port); err != nil {
		return "", "", nil, err
	}
	proto := map[string]model.Proto{"--protocol=tcp": model.TCP, "--protocol=udp": model.UDP, "--protocol=sctp": model.SCTP}[cmd[4]]
	if proto == 0 {
		return "", "", nil, fmt.Errorf("unexpected protocol in %q", cmd)
	}
	allowed := tables.Allows(src, dst, proto, port)
	if o.dp != nil {
		if allowed, err = o.datapathAllows(src, dst, proto, port); err != nil {
			return "", "", nil, err
		}
		// What the benchmark reads as enforced agrees with the packets.
		inMaps, err := policy.MapsAllow(o.dp.Maps(), src, dst, proto, port)
		if err != nil {
			return "", "", nil, err
		}
		if inMaps != allowed {
			o.t.Errorf("%s -> %s:%d/%d: MapsAllow says %v, the datapath %v", src, dst, port, proto, inMaps, allowed)
		}
	}
	if !allowed {
		return "", "", errors.New("blocked"), nil
	}
	return "", "", nil, nil
}

// datapathAllows sends a connection's first packet through the sender's
// from_pod and the receiver's to_pod: allowed unless either drops it.
func (o *oracleKube) datapathAllows(src, dst netip.Addr, proto model.Proto, port uint16) (bool, error) {
	if src == dst {
		return true, nil // never leaves the pod
	}
	o.mu.Lock()
	o.sport++
	from := netip.AddrPortFrom(src, o.sport)
	o.mu.Unlock()
	to := netip.AddrPortFrom(dst, port)
	var in []byte
	switch proto {
	case model.TCP:
		in = pkt.TCP(from, to, pkt.TCPOpts{SYN: true, Seq: 1, Window: 64240}, nil)
	case model.UDP:
		in = pkt.UDP(from, to, []byte("probe"))
	default:
		in = pkt.SCTPInit(from, to)
	}
	progs := o.dp.Programs()
	for _, prog := range []*ebpf.Program{progs.FromPod, progs.ToPod} {
		out := make([]byte, len(in)+256)
		verdict, err := prog.Run(&ebpf.RunOptions{Data: in, DataOut: out})
		if err != nil {
			return false, err
		}
		if verdict == 2 { // TC_ACT_SHOT
			return false, nil
		}
	}
	return true, nil
}

// resolve turns a probe's host into the destination pod's address: an IP,
// or its Service's name (s-<ns>-<pod>.<ns>.svc.cluster.local; the policy
// judges the backend).
func (o *oracleKube) resolve(host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a, nil
	}
	parts := strings.Split(host, ".")
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "s-"+parts[1]+"-") {
		return netip.Addr{}, fmt.Errorf("unexpected probe host %q", host)
	}
	p, err := o.MockKubernetes.GetPod(parts[1], strings.TrimPrefix(parts[0], "s-"+parts[1]+"-"))
	if err != nil {
		return netip.Addr{}, err
	}
	return netip.ParseAddr(p.Status.PodIP)
}

// updateCluster makes held what fresh is, replacing only the objects
// that differ, and names them.
func updateCluster(held, fresh *policy.Cluster) (pods []model.PodID, nss []string, pols []model.PolicyID) {
	for id, p := range fresh.Pods {
		if !reflect.DeepEqual(held.Pods[id], p) {
			held.SetPod(id, p)
			pods = append(pods, id)
		}
	}
	for id := range held.Pods {
		if fresh.Pods[id] == nil {
			held.SetPod(id, nil)
			pods = append(pods, id)
		}
	}
	for name, ns := range fresh.Namespaces {
		if !reflect.DeepEqual(held.Namespaces[name], ns) {
			held.SetNamespace(name, ns)
			nss = append(nss, name)
		}
	}
	for name := range held.Namespaces {
		if fresh.Namespaces[name] == nil {
			held.SetNamespace(name, nil)
			nss = append(nss, name)
		}
	}
	for id, p := range fresh.Policies {
		if !reflect.DeepEqual(held.Policies[id], p) {
			held.SetPolicy(id, p)
			pols = append(pols, id)
		}
	}
	for id := range held.Policies {
		if fresh.Policies[id] == nil {
			held.SetPolicy(id, nil)
			pols = append(pols, id)
		}
	}
	return pods, nss, pols
}
