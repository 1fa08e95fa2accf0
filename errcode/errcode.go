package errcode

import (
	"errors"
	"fmt"
)

// Coder is implemented by errors that carry a stable code.
type Coder interface {
	ErrorCode() string
}

// Of returns the code of the first error in err's chain that has one, or ""
// when none does (including a nil err).
func Of(err error) string {
	var c Coder
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return ""
}

// Sentinel is a comparable error value with a code, meant to be declared once
// as a package variable and tested with errors.Is.
type Sentinel struct {
	code string
	msg  string
}

// New returns a sentinel with the given code and message.
func New(code, msg string) *Sentinel { return &Sentinel{code: code, msg: msg} }

func (s *Sentinel) Error() string     { return s.msg }
func (s *Sentinel) ErrorCode() string { return s.code }

// Wrap returns an error whose message is s's message followed by detail and
// which satisfies errors.Is(err, s) and Of(err) == s's code.
func (s *Sentinel) Wrap(format string, args ...any) error {
	return &detailed{s: s, detail: fmt.Sprintf(format, args...)}
}

type detailed struct {
	s      *Sentinel
	detail string
}

func (d *detailed) Error() string     { return d.s.msg + ": " + d.detail }
func (d *detailed) ErrorCode() string { return d.s.code }
func (d *detailed) Unwrap() error     { return d.s }

// ConfigInvalid is the code of every configuration error.
const ConfigInvalid = "CONFIG.INVALID"

// ErrConfigInvalid matches every *ConfigError with errors.Is.
var ErrConfigInvalid = New(ConfigInvalid, "invalid configuration")

// ConfigError names the configuration field that is wrong, the value it had,
// and why it is refused.
type ConfigError struct {
	Field  string
	Value  any
	Reason string
}

// Config returns a *ConfigError. Field is the dotted path a user would write
// (for example "Health.Interval"), value the offending value as given.
func Config(field string, value any, reason string) error {
	return &ConfigError{Field: field, Value: value, Reason: reason}
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("invalid configuration: %s = %#v: %s", e.Field, e.Value, e.Reason)
}

// ErrorCode returns ConfigInvalid.
func (e *ConfigError) ErrorCode() string { return ConfigInvalid }

// Is makes errors.Is(err, ErrConfigInvalid) true.
func (e *ConfigError) Is(target error) bool { return target == ErrConfigInvalid }
