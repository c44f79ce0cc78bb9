package netpol

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/kube"
	"github.com/pkg/errors"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// racingKube answers the first `conflicts` label writes as the API server
// answers an update that lost a race (cyclonus wraps the error as shown),
// then writes through to cyclonus's in-memory cluster.
type racingKube struct {
	*kube.MockKubernetes
	conflicts, calls int
	other            error
}

func (r *racingKube) fail(kind, name string) error {
	r.calls++
	if r.other != nil {
		return r.other
	}
	if r.calls <= r.conflicts {
		err := apierrors.NewConflict(schema.GroupResource{Resource: kind}, name, fmt.Errorf("the object has been modified"))
		return errors.Wrapf(err, "unable to update %s %s", kind, name)
	}
	return nil
}

func (r *racingKube) SetPodLabels(ns, pod string, labels map[string]string) (*v1.Pod, error) {
	if err := r.fail("pods", ns+"/"+pod); err != nil {
		return nil, err
	}
	return r.MockKubernetes.SetPodLabels(ns, pod, labels)
}

func (r *racingKube) SetNamespaceLabels(ns string, labels map[string]string) (*v1.Namespace, error) {
	if err := r.fail("namespaces", ns); err != nil {
		return nil, err
	}
	return r.MockKubernetes.SetNamespaceLabels(ns, labels)
}

func TestLabelWritesRetryConflictsOnly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		conflicts int
		other     error
		wantErr   string
		wantCalls int
	}{
		{name: "no race: one write", wantCalls: 1},
		{name: "lost to kubelet's status write twice, then written", conflicts: 2, wantCalls: 3},
		{name: "a conflict every time: gives up and says so", conflicts: 1000, wantErr: "the object has been modified", wantCalls: 5},
		{name: "any other error is not retried", other: errors.New("forbidden"), wantErr: "forbidden", wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := kube.NewMockKubernetes(1)
			ns := &v1.Namespace{}
			ns.Name = "y"
			if _, err := mock.CreateNamespace(ns); err != nil {
				t.Fatal(err)
			}
			pod := &v1.Pod{}
			pod.Namespace, pod.Name = "y", "c"
			if _, err := mock.CreatePod(pod); err != nil {
				t.Fatal(err)
			}
			// What each write returns is what cyclonus goes on with (the
			// mock keeps pod labels but not namespace labels).
			for _, write := range []struct {
				what string
				do   func(k kube.IKubernetes) (map[string]string, error)
			}{
				{"pod", func(k kube.IKubernetes) (map[string]string, error) {
					p, err := k.SetPodLabels("y", "c", map[string]string{"pod": "c", "new": "1"})
					if p == nil {
						return nil, err
					}
					return p.Labels, err
				}},
				{"namespace", func(k kube.IKubernetes) (map[string]string, error) {
					n, err := k.SetNamespaceLabels("y", map[string]string{"ns": "y", "new": "1"})
					if n == nil {
						return nil, err
					}
					return n.Labels, err
				}},
			} {
				r := &racingKube{MockKubernetes: mock, conflicts: tc.conflicts, other: tc.other}
				labels, err := write.do(conflictRetrying{r})
				if tc.wantErr == "" && err != nil {
					t.Fatalf("%s: %v", write.what, err)
				}
				if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
					t.Fatalf("%s: error %v, want one saying %q", write.what, err, tc.wantErr)
				}
				if r.calls != tc.wantCalls {
					t.Errorf("%s: %d writes, want %d", write.what, r.calls, tc.wantCalls)
				}
				if written := labels["new"] == "1"; written != (tc.wantErr == "") {
					t.Errorf("%s: labels %v after the write (error %v)", write.what, labels, err)
				}
			}
		})
	}
}
