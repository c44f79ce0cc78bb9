package bgp

import (
	"sync/atomic"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/sirupsen/logrus"
)

// gobgpLogger hands GoBGP's log lines to the agent's logrus logger. GoBGP
// is chatty at info (every configuration call, every peer's FSM step), so
// only warnings and errors pass by default: a session going down is a
// warning there ("sent notification", "hold timer expired").
type gobgpLogger struct {
	l     logrus.FieldLogger
	level atomic.Uint32
}

func newGoBGPLogger(l logrus.FieldLogger) *gobgpLogger {
	g := &gobgpLogger{l: l.WithField("component", "gobgp")}
	g.level.Store(uint32(gobgplog.WarnLevel))
	return g
}

func (g *gobgpLogger) on(l gobgplog.LogLevel) bool { return l <= gobgplog.LogLevel(g.level.Load()) }

func (g *gobgpLogger) with(f gobgplog.Fields) logrus.FieldLogger {
	return g.l.WithFields(logrus.Fields(f))
}

// Panic keeps GoBGP's meaning (it does not go on).
func (g *gobgpLogger) Panic(msg string, f gobgplog.Fields) { g.with(f).Panic(msg) }

// Fatal is logged as an error: a library must not exit the agent.
func (g *gobgpLogger) Fatal(msg string, f gobgplog.Fields) { g.with(f).Error(msg) }

func (g *gobgpLogger) Error(msg string, f gobgplog.Fields) {
	if g.on(gobgplog.ErrorLevel) {
		g.with(f).Error(msg)
	}
}

func (g *gobgpLogger) Warn(msg string, f gobgplog.Fields) {
	if g.on(gobgplog.WarnLevel) {
		g.with(f).Warn(msg)
	}
}

func (g *gobgpLogger) Info(msg string, f gobgplog.Fields) {
	if g.on(gobgplog.InfoLevel) {
		g.with(f).Info(msg)
	}
}

func (g *gobgpLogger) Debug(msg string, f gobgplog.Fields) {
	if g.on(gobgplog.DebugLevel) {
		g.with(f).Debug(msg)
	}
}

func (g *gobgpLogger) SetLevel(l gobgplog.LogLevel) { g.level.Store(uint32(l)) }
func (g *gobgpLogger) GetLevel() gobgplog.LogLevel  { return gobgplog.LogLevel(g.level.Load()) }
