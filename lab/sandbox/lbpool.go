package sandbox

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/netcube/netcube/pkg/source/kube"
)

// The sandbox's LoadBalancer IPs: the top of the underlay's subnets, so
// that the external client reaches them on its link (ARP, NDP) with no
// route, as a host on a bare-metal cluster's network would.
var DefaultLBPoolCIDRs = []string{"172.30.0.240/28", "fd00:172:30::f0/124"}

// DefaultLBPool is the name of the pool the sandbox creates.
const DefaultLBPool = "sandbox"

// createLBPool creates the sandbox's NetworkLoadBalancerPool once its CRD
// is served.
func createLBPool(rc *rest.Config) error {
	d, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	cidrs := make([]any, len(DefaultLBPoolCIDRs))
	for i, c := range DefaultLBPoolCIDRs {
		cidrs[i] = c
	}
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "netcube.io/v1alpha1", "kind": "NetworkLoadBalancerPool",
		"metadata": map[string]any{"name": DefaultLBPool},
		"spec":     map[string]any{"cidrs": cidrs},
	}}
	return createOnceServed(d.Resource(kube.NetworkLoadBalancerPools), pool)
}

// createOnceServed creates obj, waiting up to 30 s for its CRD to be
// served (helm installs the chart's CRDs just before).
func createOnceServed(r dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := r.Create(context.Background(), obj, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		time.Sleep(200 * time.Millisecond) // the CRD is not served yet
	}
}
