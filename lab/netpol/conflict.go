package netpol

import (
	"github.com/mattfenwick/cyclonus/pkg/kube"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
)

// conflictRetrying is cyclonus's cluster client with its label writes
// retried on a conflict. cyclonus sets labels by get-then-update, and the
// pods it labels are written by others too (kubelet updates a pod's
// status whenever a container's state changes): an update that lost that
// race is answered 409 Conflict, which cyclonus reported as the test
// case's failure although no policy was probed. The retry re-reads the
// object, so the labels written are still exactly the case's.
type conflictRetrying struct {
	kube.IKubernetes
}

func (k conflictRetrying) SetPodLabels(namespace, pod string, labels map[string]string) (*v1.Pod, error) {
	var out *v1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() (err error) {
		out, err = k.IKubernetes.SetPodLabels(namespace, pod, labels)
		return err
	})
	return out, err
}

func (k conflictRetrying) SetNamespaceLabels(namespace string, labels map[string]string) (*v1.Namespace, error) {
	var out *v1.Namespace
	err := retry.RetryOnConflict(retry.DefaultRetry, func() (err error) {
		out, err = k.IKubernetes.SetNamespaceLabels(namespace, labels)
		return err
	})
	return out, err
}
