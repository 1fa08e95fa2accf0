package coord

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcd (server and client) logs through zap. We send those records to the
// caller's slog.Logger so one process has one log stream, and we drop
// everything below minLevel: etcd is chatty at info and the embedded server
// is a detail of one-machine use, not something an operator should read.
func newZapLogger(log *slog.Logger, minLevel zapcore.Level) *zap.Logger {
	if log == nil {
		return zap.NewNop()
	}
	return zap.New(&slogCore{log: log, min: minLevel})
}

// slogCore is a zapcore.Core that writes to a slog.Logger.
type slogCore struct {
	log   *slog.Logger
	min   zapcore.Level
	attrs []slog.Attr
}

var _ zapcore.Core = (*slogCore)(nil)

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	attrs := make([]slog.Attr, 0, len(c.attrs)+len(fields))
	attrs = append(attrs, c.attrs...)
	attrs = append(attrs, fieldsToAttrs(fields)...)
	return &slogCore{log: c.log, min: c.min, attrs: attrs}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	attrs := make([]slog.Attr, 0, len(c.attrs)+len(fields)+1)
	attrs = append(attrs, c.attrs...)
	attrs = append(attrs, fieldsToAttrs(fields)...)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	c.log.LogAttrs(context.Background(), zapToSlogLevel(e.Level), e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

func fieldsToAttrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	return attrs
}

func zapToSlogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}
