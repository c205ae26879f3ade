package core

import "errors"

// Errors returned by the core. Each has a stable negative code for the
// guest's scalar fast path (see Code).
var (
	ErrNotConfigured  = errors.New("core: module is not configured")
	ErrUnknownLimiter = errors.New("core: unknown limiter")
	ErrKeyTooLong     = errors.New("core: key longer than 256 bytes")
	ErrEmptyKey       = errors.New("core: empty key")
	ErrBadCost        = errors.New("core: cost must be between 0 and 2^40")
	ErrBadTime        = errors.New("core: time must be >= 0 ns")
	ErrTooManyChecks  = errors.New("core: a decision checks 1 to 8 limiters")
	ErrStaleReply     = errors.New("core: reply does not answer the outstanding batch")
	ErrNoIsolateID    = errors.New("core: sync needs an isolate id in the config")
	ErrBadInput       = errors.New("core: malformed input")
)

var codes = []error{nil, ErrNotConfigured, ErrUnknownLimiter, ErrKeyTooLong, ErrEmptyKey,
	ErrBadCost, ErrBadTime, ErrTooManyChecks, ErrStaleReply, ErrNoIsolateID, ErrBadInput}

// Code returns the negative code of err for the scalar fast path: 0 for nil,
// -1 for ErrNotConfigured, -2 for ErrUnknownLimiter, and so on in the order
// of the variables above; -10 for any other error (ErrBadInput).
func Code(err error) int32 {
	if err == nil {
		return 0
	}
	for i, e := range codes {
		if e != nil && is(err, e) {
			return -int32(i)
		}
	}
	return -int32(len(codes) - 1)
}

// ErrorForCode is the inverse of Code, for hosts; unknown codes map to ErrBadInput.
func ErrorForCode(c int32) error {
	i := int(-c)
	if i <= 0 || i >= len(codes) {
		if c == 0 {
			return nil
		}
		return ErrBadInput
	}
	return codes[i]
}

// is is errors.Is for the module's own errors (comparable sentinels, wrapped
// by fmt-free wrappers and errors.Join): errors.Is checks that the target's
// type is comparable through internal/reflectlite, 2.4 KB of the module.
func is(err, target error) bool {
	for err != nil {
		if err == target {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if is(e, target) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
