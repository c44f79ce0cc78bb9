package lb

import (
	"strings"
	"testing"

	"github.com/netcube/netcube/pkg/datapath"
)

func TestNodePortVariables(t *testing.T) {
	for _, c := range []struct {
		mode, routing string
		want          datapath.LBNodePortMode
		err           string // in the error; "" = none
	}{
		{"snat", "native", datapath.LBNodePortSNAT, ""},
		{"snat", "vxlan", datapath.LBNodePortSNAT, ""},
		{"dsr", "native", datapath.LBNodePortDSR, ""},
		{"hybrid", "kernel", datapath.LBNodePortHybrid, ""},
		{"dsr", "vxlan", 0, `nodePortMode (--nodeport-mode) "dsr" needs routing native or kernel`},
		{"hybrid", "vxlan", 0, `nodePortMode (--nodeport-mode) "hybrid" needs routing native or kernel`},
		{"DSR", "native", 0, `nodePortMode (--nodeport-mode) "DSR": want snat, dsr or hybrid`},
		{"", "native", 0, `nodePortMode (--nodeport-mode) "": want snat, dsr or hybrid`},
	} {
		vars, err := NodePortVariables(c.mode, c.routing)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s with %s: error %v, want %q", c.mode, c.routing, err, c.err)
			}
			continue
		}
		if err != nil || vars["lb_nodeport"] != c.want {
			t.Errorf("%s with %s: %v, %v; want lb_nodeport %v", c.mode, c.routing, vars, err, c.want)
		}
	}
}
