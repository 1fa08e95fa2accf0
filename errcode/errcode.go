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

// coded puts an error's stable code in front of its message.
type coded struct{ err error }

func (e coded) Error() string { return Of(e.err) + ": " + e.err.Error() }
func (e coded) Unwrap() error { return e.err }

// WithCode returns err with its stable code in front of its message
// ("CONFIG.INVALID: invalid configuration: …"), so an operator, or a
// script reading a command's stderr, sees the code and not only prose.
// An error with no code, and nil, are returned as they are; errors.Is and
// errors.As see through the result.
func WithCode(err error) error {
	if err == nil || Of(err) == "" {
		return err
	}
	return coded{err}
}

// RenameFields returns a *ConfigError about a field that names maps (Go
// field → the name the user wrote, such as a flag) as the same error
// about that name: the user typed "--players", not the field "Players".
// Any other error is returned unchanged.
func RenameFields(err error, names map[string]string) error {
	var ce *ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	name, ok := names[ce.Field]
	if !ok {
		return err
	}
	return Config(name, ce.Value, ce.Reason)
}

// Indexless returns a *ConfigError about one element of a list field
// ("Endpoints[2]") as the same error about the field ("Endpoints"), for a
// caller whose user gave the whole list at once (one flag). Any other
// error is returned unchanged.
func Indexless(err error) error {
	var ce *ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	field, ok := withoutIndex(ce.Field)
	if !ok {
		return err
	}
	return Config(field, ce.Value, ce.Reason)
}

// withoutIndex returns field without a final "[digits]", and whether it
// had one.
func withoutIndex(field string) (string, bool) {
	open := strings.LastIndexByte(field, '[')
	if open < 0 || !strings.HasSuffix(field, "]") || open+2 > len(field)-1 {
		return field, false
	}
	for _, c := range field[open+1 : len(field)-1] {
		if c < '0' || c > '9' {
			return field, false
		}
	}
	return field[:open], true
}
