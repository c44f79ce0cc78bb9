package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/deploy"
	"github.com/netcube/netcube/pkg/lbipam"
)

// The sandbox's LoadBalancer IPs: the top of the underlay's subnets, so
// that the external client reaches them on its link (ARP, NDP) with no
// route, as a host on a bare-metal cluster's network would.
var DefaultLBPoolCIDRs = []string{"172.30.0.240/28", "fd00:172:30::f0/124"}

// DefaultLBPool is the name of the pool the sandbox creates.
const DefaultLBPool = "sandbox"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates netcube's CRDs (the chart's, as Helm would) where the
// agents are started by hand.
func installCRDs(rc *rest.Config) error {
	d, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	files, err := fs.Glob(deploy.CRDs, "helm/netcube/crds/*.yaml")
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := deploy.CRDs.ReadFile(f)
		if err != nil {
			return err
		}
		var crd unstructured.Unstructured
		if err := yaml.Unmarshal(b, &crd.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := d.Resource(crdResource).Create(context.Background(), &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("CRD %s: %w", crd.GetName(), err)
		}
	}
	return nil
}

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
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = d.Resource(lbipam.Pools).Create(context.Background(), pool, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("NetworkLoadBalancerPool %s: %w", DefaultLBPool, err)
		}
		time.Sleep(200 * time.Millisecond) // the CRD is not served yet
	}
}
