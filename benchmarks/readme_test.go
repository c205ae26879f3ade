package benchmarks

import (
	"context"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The README's figures against what the code produces: the module size
// and its budget, the memory per key, and the names of the benchmark
// tables' rows (`edgelimit bench -readme` prints the same rows).

// readme returns the repository's README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tableAfter returns the rows (cells trimmed; header and separator rows
// left out) of the first markdown table after the first line starting
// with anchor.
func tableAfter(t *testing.T, text, anchor string) [][]string {
	t.Helper()
	lines := strings.Split(text, "\n")
	i := 0
	for i < len(lines) && !strings.HasPrefix(lines[i], anchor) {
		i++
	}
	if i == len(lines) {
		t.Fatalf("README: no line starts with %q (the test finds its table by it)", anchor)
	}
	for i < len(lines) && !strings.HasPrefix(lines[i], "|") {
		i++
	}
	var rows [][]string
	for j := i; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
		if j == i || strings.HasPrefix(lines[j], "|---") {
			continue // header, separator
		}
		rows = append(rows, cells(lines[j]))
	}
	if len(rows) == 0 {
		t.Fatalf("README: no table after %q", anchor)
	}
	return rows
}

// cells splits a markdown table row at its unescaped pipes.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var out []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteString(`\|`)
			i++
		case line[i] == '|':
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(out, strings.TrimSpace(cur.String()))
}

// names reports whether a README row's first cell names name: the cell is
// name, or name followed by a parenthesis.
func names(cell, name string) bool {
	return cell == name || strings.HasPrefix(cell, name+" (")
}

// rowNamed returns the row of rows whose first cell names name.
func rowNamed(t *testing.T, rows [][]string, name string) []string {
	t.Helper()
	for _, r := range rows {
		if names(r[0], name) {
			return r
		}
	}
	t.Fatalf("README: no row %q", name)
	return nil
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const moduleTable = "Module and host (`go run ./cmd/edgelimit bench"

// TestReadmeModuleSize: the README's module size, in KB and in bytes, is
// within 1 KB of the module's (others change the module; the figure must
// follow when it moves by more), and the module is within the budget the
// row states.
func TestReadmeModuleSize(t *testing.T) {
	row := rowNamed(t, tableAfter(t, readme(t), moduleTable), RowModuleSize)
	m := regexp.MustCompile(`^(\d+) KB \(([\d,]+) bytes\)`).FindStringSubmatch(row[1])
	if m == nil {
		t.Fatalf("README module size %q: want \"N KB (N,NNN bytes)...\"", row[1])
	}
	actual := float64(ModuleBytes())
	kb, bytes := num(t, m[1]), num(t, m[2])
	if math.Abs(kb*1000-actual) > 1000 || math.Abs(bytes-actual) > 1000 {
		t.Errorf("README says the module is %s; it is %s (`ls -l wasm/edgelimit.wasm`): update the row", m[0], KB(ModuleBytes()))
	}
	b := regexp.MustCompile(`<= (\d+) KB`).FindStringSubmatch(row[2])
	if b == nil {
		t.Fatalf("README module size target %q: want \"<= N KB...\"", row[2])
	}
	if budget := num(t, b[1]) * 1000; actual > budget {
		t.Errorf("the module is %s, over the README's budget of %s KB", KB(ModuleBytes()), b[1])
	}
}

// TestReadmeMemoryPerKey: the README's linear memory and state per key for
// 100,000 keys of 32 bytes, and where memory doubles, are the module's
// (deterministic: within 2% for the per-key figures and key counts, which
// move a little with any change to the module).
func TestReadmeMemoryPerKey(t *testing.T) {
	text := readme(t)
	row := rowNamed(t, tableAfter(t, text, "Measured (`make bench-js`"), RowMemory)
	re := regexp.MustCompile("^(\\d+) MiB \\((\\d+) bytes per key; the module's own count, `state_bytes`, ([\\d.]+) MiB, (\\d+) bytes per key; " +
		"16 MiB from ([\\d,]+) keys, 32 MiB from ([\\d,]+), 64 MiB from ([\\d,]+) with a key cap of 200,000")
	m := re.FindStringSubmatch(row[1])
	if m == nil {
		t.Fatalf("README memory row %q: want it to match %s", row[1], re)
	}
	at100k, growth, err := MemoryFigure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	measured := FormatMemory(at100k, growth)
	within := func(what string, readme, got float64, tol float64) {
		t.Helper()
		if math.Abs(readme-got) > tol {
			t.Errorf("README %s: %g, measured %g; the module's row is now:\n| %s | %s |", what, readme, got, RowMemory, measured)
		}
	}
	within("linear memory (MiB)", num(t, m[1]), float64(at100k.Linear)/(1<<20), 0)
	within("bytes per key", num(t, m[2]), at100k.PerKey(), 0.02*at100k.PerKey())
	within("state_bytes (MiB)", num(t, m[3]), float64(at100k.Stats.StateBytes)/(1<<20), 0.02*float64(at100k.Stats.StateBytes)/(1<<20))
	within("state bytes per key", num(t, m[4]), at100k.StatePerKey(), 0.02*at100k.StatePerKey())
	for i, g := range []struct {
		m   Memory
		mib uint32
	}{{at100k, 16}, {at100k, 32}, {growth, 64}} {
		from := float64(g.m.From(g.mib << 20))
		within(strconv.Itoa(int(g.mib))+" MiB from keys", num(t, m[5+i]), from, 0.02*from)
	}
	// The prose below the table repeats the module's count.
	p := regexp.MustCompile("\\(`state_bytes`\\) is ([\\d.]+) MiB at 100,000 keys, (\\d+) bytes per key").FindStringSubmatch(text)
	if p == nil || p[1] != m[3] || p[2] != m[4] {
		t.Errorf("README prose on state_bytes %q disagrees with the row (%s MiB, %s bytes per key)", p, m[3], m[4])
	}
}

// TestReadmeBenchRows: every row of the README's benchmark tables names a
// row `edgelimit bench` produces (benchmarks.ModuleRows for the module
// table; Systems, GroupDecisionCost and DecisionCostRows for the peers
// table), so a renamed or removed benchmark fails here until the README
// follows.
func TestReadmeBenchRows(t *testing.T) {
	text := readme(t)
	for _, r := range tableAfter(t, text, moduleTable) {
		ok := false
		for _, n := range ModuleRows {
			ok = ok || names(r[0], n)
		}
		if !ok {
			t.Errorf("README module table row %q is none of the rows `edgelimit bench -readme` produces: %q", r[0], ModuleRows)
		}
	}
	all := map[string]bool{}
	for _, b := range All() {
		all[b.Name] = true
	}
	groups := map[string]bool{GroupDecisionCost: true}
	known := map[string]bool{}
	for _, s := range Systems() {
		groups[s.Group] = true
		known[s.Name] = true
	}
	for _, n := range DecisionCostRows {
		if !all[n] {
			t.Errorf("DecisionCostRows names %q, which is not a benchmark of All", n)
		}
		known[n] = true
	}
	bold := regexp.MustCompile(`^\*\*(.+?)\*\*`)
	rows := tableAfter(t, text, "Peers, started by the benchmark on loopback")
	for _, r := range rows {
		if g := bold.FindStringSubmatch(r[0]); g != nil {
			if !groups[g[1]] {
				t.Errorf("README peers table group %q is not a group `edgelimit bench` produces", g[1])
			}
			continue
		}
		ok := false
		for n := range known {
			ok = ok || names(r[0], n)
		}
		if !ok {
			t.Errorf("README peers table row %q is not a row `edgelimit bench` produces", r[0])
		}
	}
}

// TestNamesAndCells checks the helpers the README tests rely on, on rows
// that must and must not match.
func TestNamesAndCells(t *testing.T) {
	if !names("module size (`ls -l`)", "module size") || !names("module size", "module size") ||
		names("module sizes", "module size") || names("coordinator on Redis Cluster 3+3, 2 coordinators, WAIT 1", "coordinator on Redis Cluster 3+3, 2 coordinators") {
		t.Error("names")
	}
	got := cells("| a `x\\|y` | b | c |")
	if len(got) != 3 || got[0] != "a `x\\|y`" || got[2] != "c" {
		t.Errorf("cells: %q", got)
	}
	if KB(153348) != "153 KB (153,348 bytes)" || Thousands(1000000) != "1,000,000" || Thousands(999) != "999" || Thousands(-1234) != "-1,234" {
		t.Errorf("KB/Thousands: %s %s", KB(153348), Thousands(1000000))
	}
}
