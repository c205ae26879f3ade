package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// eachDataLine calls fn with the number (from 1) and the trimmed text of
// every line of data that is neither blank nor a comment (starting with
// '#'), until fn returns false or an error, which it returns. Lines may be
// up to 16 MiB long (a counts trace may sit on one line). A UTF-8 byte
// order mark before the first line, as spreadsheet exports write, is
// skipped.
func eachDataLine(data []byte, fn func(line int, text string) (bool, error)) error {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		more, err := fn(line, text)
		if err != nil || !more {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("sim: trace line %d: longer than 16 MiB: %w", line+1, err)
		}
		return fmt.Errorf("sim: trace: %w", err)
	}
	return nil
}
