package traffic

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// TestLoadRate: a paced load sends about rate requests a second; back to
// back (the control) it sends many more.
func TestLoadRate(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	go func() { _ = Serve("t", port) }()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server not listening")
		}
		time.Sleep(10 * time.Millisecond)
	}
	free := Load(&Client{Proto: "tcp", Addr: addr}, 500*time.Millisecond)
	paced := Load(&Client{Proto: "tcp", Addr: addr, Rate: 200}, 500*time.Millisecond)
	if paced.Errors != 0 || paced.Requests < 90 || paced.Requests > 110 {
		t.Errorf("at 200/s for 0.5 s: %d requests (%d errors), want about 100", paced.Requests, paced.Errors)
	}
	if free.Requests < 3*paced.Requests {
		t.Errorf("back to back: %d requests, want far more than paced (%d)", free.Requests, paced.Requests)
	}
}
