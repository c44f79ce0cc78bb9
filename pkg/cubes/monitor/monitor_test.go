package monitor

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/netcube/netcube/pkg/events"
)

// TestHandlerStreamsEvents: the local API streams each event as a JSON
// line, and the subscription ends with the client.
func TestHandlerStreamsEvents(t *testing.T) {
	h := events.NewHub()
	srv := httptest.NewServer(Handler(h, nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for h.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	h.Publish(events.Event{Type: "drop", Drop: "no-endpoints", Cube: "lb"})
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var e events.Event
	if err := json.Unmarshal([]byte(line), &e); err != nil || e.Drop != "no-endpoints" {
		t.Fatalf("line %q: %v", line, err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for h.Subscribers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the subscription outlived its client")
		}
		h.Publish(events.Event{}) // a write to the gone client ends the handler
		time.Sleep(10 * time.Millisecond)
	}
}
