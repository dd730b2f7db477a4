package rewrite

import (
	"errors"

	agentvault "github.com/agentvault/agentvault"
)

// Replacer swaps values. It is satisfied by *tokens.Replacer (requests:
// tokens and stand-ins to real values) and by the proxy's scrubber
// (responses: real values to stand-ins).
//
// Both methods append the rewritten src to dst and report how many values
// were replaced. ReplaceField gets one whole field value (a form value, a JSON
// string, a path segment), so a short value such as a CVV may match only the
// whole field; ReplaceText gets free text, where only values long enough to be
// unambiguous match.
type Replacer interface {
	ReplaceField(dst, src []byte) ([]byte, int, error)
	ReplaceText(dst, src []byte) ([]byte, int, error)
}

// DefaultLimit caps a decoded body when the caller passes a limit <= 0.
const DefaultLimit = 32 << 20

// field rewrites one whole field value. It returns src itself (not a copy)
// when nothing matched, so callers can keep the original bytes.
func field(r Replacer, src []byte) ([]byte, int, error) {
	out, n, err := r.ReplaceField(nil, src)
	if err != nil {
		return nil, 0, replacerError(err)
	}
	if n == 0 {
		return src, 0, nil
	}
	return out, n, nil
}

// text rewrites free text, returning src itself when nothing matched.
func text(r Replacer, src []byte) ([]byte, int, error) {
	out, n, err := r.ReplaceText(nil, src)
	if err != nil {
		return nil, 0, replacerError(err)
	}
	if n == 0 {
		return src, 0, nil
	}
	return out, n, nil
}

// replacerError keeps a coded error from the replacer as it is (its code, e.g.
// token_not_authorized, is the reason the caller must see) and codes anything
// else as a substitution failure.
func replacerError(err error) error {
	var ae *agentvault.Error
	if errors.As(err, &ae) {
		return err
	}
	return agentvault.Wrap(agentvault.CodeSubstitution, err, "value replacement failed")
}

func limitOrDefault(limit int64) int64 {
	if limit <= 0 {
		return DefaultLimit
	}
	return limit
}

func pathError() error {
	return agentvault.Errorf(agentvault.CodeSubstitution, "rewritten URL path is not validly encoded")
}
