package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// eachDataLine calls fn with the number (from 1) and the trimmed text of
// every line of data that is neither blank nor a comment (starting with
// '#'), until fn returns false or an error, which it returns. Lines may be
// up to 16 MiB long (a counts trace may sit on one line).
func eachDataLine(data []byte, fn func(line int, text string) (bool, error)) error {
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
		return fmt.Errorf("sim: trace: %w", err)
	}
	return nil
}
