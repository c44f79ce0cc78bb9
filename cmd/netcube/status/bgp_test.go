package status

import (
	"bytes"
	"testing"
	"time"

	"github.com/netcube/netcube/pkg/localapi"
)

// TestStatusShowsEachBGPSession: the status names every session with its
// state, its uptime when established, and the routes sent and received,
// a session that is not up among them.
func TestStatusShowsEachBGPSession(t *testing.T) {
	var b bytes.Buffer
	writeBGP(&b, &localapi.BGPStatus{Active: true, LocalASN: 64512,
		Peers: []localapi.BGPPeer{
			{Address: "172.30.11.254", ASN: 64500, State: "established", Uptime: 90 * time.Second, Advertised: 4, Received: 2},
			{Address: "172.30.12.254", ASN: 64501, State: "active"},
		},
		Routes: make([]localapi.BGPRoute, 4)})
	want := "BGP:        ASN 64512, 1 of 2 sessions established, 4 routes announced (netcube bgp peers)\n" +
		"            peer 172.30.11.254 AS 64500: established 1m30s, 4 sent, 2 received\n" +
		"            peer 172.30.12.254 AS 64501: active, 0 sent, 0 received\n"
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
