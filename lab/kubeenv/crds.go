package kubeenv

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
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates netcube's CRDs (the chart's, as Helm would) where the
// agents are started by hand, and waits until each is served.
func InstallCRDs(rc *rest.Config) error {
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
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		if len(versions) == 0 {
			return fmt.Errorf("CRD %s: no versions", crd.GetName())
		}
		version, _ := versions[0].(map[string]any)["name"].(string)
		served := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := d.Resource(served).List(context.Background(), metav1.ListOptions{Limit: 1})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not served after 30 s: %w", crd.GetName(), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
