package account

import (
	"strconv"

	"github.com/shardwise/shardwise/errcode"
)

// ID is an account. The zero value is None.
type ID uint64

// None is "no account": the owner of an entity no player owns. It is never
// a valid account and has no text form Parse accepts.
const None ID = 0

// MaxTextLen is the length of the longest canonical text, in bytes
// (18446744073709551615, the largest ID).
const MaxTextLen = 20

// CodeInvalid is the stable error code of a text that is not an account.
const CodeInvalid = "ACCOUNT.INVALID"

// ErrInvalid: the text is not the canonical text of an account. Typed
// detail: *InvalidError.
var ErrInvalid = errcode.New(CodeInvalid, "account: invalid account text")

// InvalidError says which text was refused and why.
// errors.Is(err, ErrInvalid) holds.
type InvalidError struct {
	Text   string // the refused text, cut to MaxTextLen+8 bytes with "…"
	Reason string
}

func (e *InvalidError) Error() string {
	return "account: " + strconv.Quote(e.Text) + " is not an account: " + e.Reason
}

// ErrorCode returns CodeInvalid.
func (e *InvalidError) ErrorCode() string { return CodeInvalid }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Valid reports whether id is an account (not None).
func (id ID) Valid() bool { return id != None }

// String returns the canonical text of id, its decimal digits. None gives
// "0", which Parse refuses.
func (id ID) String() string { return strconv.FormatUint(uint64(id), 10) }

// AppendText appends the canonical text of id to b (encoding.TextAppender).
// None is refused, so nothing writes a text that Parse would not read back.
func (id ID) AppendText(b []byte) ([]byte, error) {
	if id == None {
		return b, &InvalidError{Text: "0", Reason: "0 is None, no account"}
	}
	return strconv.AppendUint(b, uint64(id), 10), nil
}

// MarshalText returns the canonical text of id; None is refused.
func (id ID) MarshalText() ([]byte, error) { return id.AppendText(make([]byte, 0, MaxTextLen)) }

// UnmarshalText sets *id to the account b names, with Parse's rules.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := parse(b)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Parse returns the account s names. s must be canonical: 1 to MaxTextLen
// decimal digits, no leading zero, not "0", at most the largest uint64.
// Anything else is an error matching ErrInvalid.
func Parse(s string) (ID, error) { return parse(s) }

func parse[T string | []byte](s T) (ID, error) {
	switch {
	case len(s) == 0:
		return None, invalid(s, "empty")
	case len(s) > MaxTextLen:
		return None, invalid(s, "longer than "+strconv.Itoa(MaxTextLen)+" digits")
	case s[0] == '0':
		if len(s) == 1 {
			return None, invalid(s, "0 is None, no account")
		}
		return None, invalid(s, "leading zero")
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			what := strconv.QuoteRune(rune(c))
			if c >= 0x80 {
				what = "0x" + strconv.FormatUint(uint64(c), 16)
			}
			return None, invalid(s, "byte "+strconv.Itoa(i)+" is "+what+", not a decimal digit")
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return None, invalid(s, "larger than 18446744073709551615")
		}
		v = v*10 + d
	}
	return ID(v), nil
}

func invalid[T string | []byte](s T, reason string) error {
	text := string(s)
	if len(text) > MaxTextLen+8 {
		text = text[:MaxTextLen+8] + "…"
	}
	return &InvalidError{Text: text, Reason: reason}
}
