package rules

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched, through errors.Is, by every error Parse and Load
// return for a rules file that is not valid. A file that cannot be read is
// not ErrInvalid.
var ErrInvalid = errors.New("rules: invalid rules")

// Error is one problem in a rules file, at a line.
type Error struct {
	// File is the source given to Parse: a path, or "builtin".
	File string
	// Line is the 1-based line the problem is on.
	Line int
	// Msg says what is wrong, without the file and line.
	Msg string
}

// Error renders the problem as "FILE:LINE: message", the form
// `guardian rules check` prints.
func (e Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Is makes errors.Is(e, ErrInvalid) true.
func (e Error) Is(target error) bool { return target == ErrInvalid }

// Errors is every problem found in a rules file, sorted by line.
type Errors []Error

// Error renders one "FILE:LINE: message" line per problem.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(es, ErrInvalid) true.
func (es Errors) Is(target error) bool { return target == ErrInvalid }
