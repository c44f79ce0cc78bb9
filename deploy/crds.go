// Package deploy holds the chart's CRDs for Go code that installs them
// without Helm: the lab's sandbox with agents started by hand, and tests.
package deploy

import "embed"

// CRDs are deploy/helm/netcube/crds/*.yaml.
//
//go:embed helm/netcube/crds/*.yaml
var CRDs embed.FS
