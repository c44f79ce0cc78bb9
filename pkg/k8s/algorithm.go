package k8s

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/netcube/netcube/pkg/model"
)

// AnnotationAlgorithm picks a Service's load-balancing algorithm: "maglev"
// or "random"; absent, the agent's --lb-algorithm.
const AnnotationAlgorithm = "netcube.io/lb-algorithm"

// ParseAlgorithm reads an algorithm's name ("" is the default).
func ParseAlgorithm(s string) (model.Algorithm, error) {
	switch s {
	case "":
		return model.AlgorithmDefault, nil
	case "random":
		return model.AlgorithmRandom, nil
	case "maglev":
		return model.AlgorithmMaglev, nil
	}
	return model.AlgorithmDefault, fmt.Errorf("load-balancing algorithm %q: want random or maglev", s)
}

// preferClose: topology-aware routing asked for, by trafficDistribution or
// by the older annotation (as kube-proxy reads them).
func preferClose(svc *corev1.Service) bool {
	if td := svc.Spec.TrafficDistribution; td != nil && (*td == corev1.ServiceTrafficDistributionPreferClose ||
		*td == corev1.ServiceTrafficDistributionPreferSameZone || *td == corev1.ServiceTrafficDistributionPreferSameNode) {
		return true
	}
	mode := svc.Annotations[corev1.AnnotationTopologyMode]
	if mode == "" {
		mode = svc.Annotations[corev1.DeprecatedAnnotationTopologyAwareHints]
	}
	return mode == "Auto" || mode == "auto"
}
