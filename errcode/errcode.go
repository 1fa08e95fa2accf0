package errcode

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
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

// Config returns a *ConfigError. Field is the name the user wrote: the
// dotted path of a struct field for a Go caller (for example
// "Health.Interval"), the flag for a command-line user (for example
// "--duration"). Value is the offending value as given, not pre-formatted:
// Error prints it the way the user would write it (see ConfigError.Error).
func Config(field string, value any, reason string) error {
	return &ConfigError{Field: field, Value: value, Reason: reason}
}

// Error reads "invalid configuration: <field> = <value>: <reason>", with the
// value in the form a user writes it: a time.Duration as a duration ("-1s",
// not -1000000000), a time.Time in RFC 3339, a string (or a type whose
// kind is string) quoted, so an empty or blank one shows; anything with a
// String or Error method through it; a slice or array as its elements
// formatted the same way ("["a", ""]"); nil as <nil>; other values as %+v.
func (e *ConfigError) Error() string {
	return "invalid configuration: " + e.Field + " = " + formatValue(e.Value) + ": " + e.Reason
}

// formatValue is the value part of ConfigError.Error.
func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "<nil>"
	case string:
		return strconv.Quote(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case fmt.Stringer, error:
		// fmt calls the method, and recovers if it panics on a nil receiver.
		return fmt.Sprint(x)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return strconv.Quote(rv.String())
	case reflect.Slice, reflect.Array:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			break // bytes read better as %+v's [1 2 3] than one per element
		}
		var b strings.Builder
		b.WriteByte('[')
		for i := range rv.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(formatValue(rv.Index(i).Interface()))
		}
		b.WriteByte(']')
		return b.String()
	}
	return fmt.Sprintf("%+v", v)
}

// ErrorCode returns ConfigInvalid.
func (e *ConfigError) ErrorCode() string { return ConfigInvalid }

// Is makes errors.Is(err, ErrConfigInvalid) true.
func (e *ConfigError) Is(target error) bool { return target == ErrConfigInvalid }
