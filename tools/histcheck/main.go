// Command histcheck checks a history of single-document operations on registers, recorded by
// tests/e2e/test_failover.py during failovers, for linearizability with porcupine (a
// register with compare-and-set per key, partitioned by key).
//
// The history is a JSON array of operations:
//
//	{"client": 0, "key": "r1", "kind": "write"|"cas"|"read",
//	 "value": "v" (write: the value written; read: the value read, null for none),
//	 "old": "a", "new": "b", "swapped": true (cas: its filter's value, its new value, whether it matched),
//	 "status": "ok"|"fail"|"unknown", "invoke": ns, "complete": ns}
//
// "fail" is an operation known not to have happened (refused before it ran): it is left out.
// "unknown" (a timeout, a connection error, a write whose majority never came) may have
// happened at any time after its invocation: it stays open to the end of the history, as
// porcupine and Jepsen treat it; an unknown read says nothing and is left out.
//
// Exit status: 0 linearizable, 1 a violation (the key and the operations are printed), 2 bad
// input or a check that did not finish in time.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is one recorded operation, as the test writes it.
type Op struct {
	Client   int     `json:"client"`
	Key      string  `json:"key"`
	Kind     string  `json:"kind"`
	Value    *string `json:"value"`
	Old      *string `json:"old"`
	New      *string `json:"new"`
	Swapped  bool    `json:"swapped"`
	Status   string  `json:"status"`
	Invoke   int64   `json:"invoke"`
	Complete int64   `json:"complete"`
}

// input is what an operation asks of the register.
type input struct {
	key  string
	kind string
	// value: the write's value; old/new: the compare-and-set's.
	value, old, new string
}

// output is what the register answered.
type output struct {
	// read: the value (or "" with none set); cas: whether it swapped.
	value   string
	none    bool
	swapped bool
	unknown bool
}

// registerModel is a register per key with write, compare-and-set and read. A state is the
// register's value; "" with none written yet (written values are never empty).
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(input).key
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() interface{} { return "" },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		st, i, o := state.(string), in.(input), out.(output)
		switch i.kind {
		case "write":
			return true, i.value
		case "cas":
			if o.unknown {
				// Linearized here it swapped if it could; one that did not happen is the
				// same operation linearized after everything else.
				if st == i.old {
					return true, i.new
				}
				return true, st
			}
			if o.swapped {
				return st == i.old, i.new
			}
			return st != i.old, st
		default:
			if o.none {
				return st == "", st
			}
			return st == o.value, st
		}
	},
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(input), out.(output)
		tail := ""
		if o.unknown {
			tail = " (unknown)"
		}
		switch i.kind {
		case "write":
			return fmt.Sprintf("write(%s, %q)%s", i.key, i.value, tail)
		case "cas":
			return fmt.Sprintf("cas(%s, %q -> %q) = %v%s", i.key, i.old, i.new, o.swapped, tail)
		default:
			if o.none {
				return fmt.Sprintf("read(%s) = none", i.key)
			}
			return fmt.Sprintf("read(%s) = %q", i.key, o.value)
		}
	},
	DescribeState: func(state interface{}) string { return fmt.Sprintf("%q", state) },
}

// operations turns the recorded history into porcupine's: failed operations and unknown
// reads left out, unknown writes open until after the last completion.
func operations(ops []Op) ([]porcupine.Operation, error) {
	var end int64
	for _, op := range ops {
		if op.Complete > end {
			end = op.Complete
		}
	}
	var out []porcupine.Operation
	for n, op := range ops {
		if op.Status != "ok" && op.Status != "fail" && op.Status != "unknown" {
			return nil, fmt.Errorf("operation %d: status %q is not ok, fail or unknown", n, op.Status)
		}
		if op.Status == "fail" || (op.Status == "unknown" && op.Kind == "read") {
			continue
		}
		in, o, err := parse(op)
		if err != nil {
			return nil, fmt.Errorf("operation %d: %w", n, err)
		}
		ret := op.Complete
		if op.Status == "unknown" {
			o.unknown = true
			ret = end + 1
		}
		if ret < op.Invoke {
			return nil, fmt.Errorf("operation %d completes (%d) before it is invoked (%d)", n, ret, op.Invoke)
		}
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: in, Call: op.Invoke, Output: o, Return: ret})
	}
	return out, nil
}

func text(field string, v *string) (string, error) {
	if v == nil || *v == "" {
		return "", fmt.Errorf("%s must be a non-empty string", field)
	}
	return *v, nil
}

func parse(op Op) (input, output, error) {
	in := input{key: op.Key, kind: op.Kind}
	var o output
	var err error
	switch op.Kind {
	case "write":
		in.value, err = text("value", op.Value)
	case "cas":
		if in.old, err = text("old", op.Old); err == nil {
			in.new, err = text("new", op.New)
		}
		o.swapped = op.Swapped
	case "read":
		if op.Value == nil {
			o.none = true
		} else {
			o.value, err = text("value", op.Value)
		}
	default:
		err = fmt.Errorf("kind %q is not write, cas or read", op.Kind)
	}
	return in, o, err
}

// verdict checks the history: nil when linearizable, else why not.
func verdict(ops []Op, timeout time.Duration, html string) error {
	history, err := operations(ops)
	if err != nil {
		return err
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, timeout)
	if html != "" {
		if err := porcupine.VisualizePath(registerModel, info, html); err != nil {
			return fmt.Errorf("writing %s: %w", html, err)
		}
	}
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return &checkError{timedOut: true, msg: fmt.Sprintf("the check did not finish within %s", timeout)}
	}
	return &checkError{msg: explain(history, info)}
}

type checkError struct {
	timedOut bool
	msg      string
}

func (e *checkError) Error() string { return e.msg }

// explain names the first key whose history is not linearizable and the operations of the
// longest prefix porcupine could linearize, with the one it could not place after them.
func explain(history []porcupine.Operation, info porcupine.LinearizationInfo) string {
	parts := registerModel.Partition(history)
	for p, partials := range info.PartialLinearizationsOperations() {
		if porcupine.CheckOperations(registerModel, parts[p]) {
			continue
		}
		key := parts[p][0].Input.(input).key
		longest := []porcupine.Operation{}
		for _, l := range partials {
			if len(l) > len(longest) {
				longest = l
			}
		}
		msg := fmt.Sprintf("key %s is not linearizable: %d operations; the longest linearizable prefix has %d:", key, len(parts[p]), len(longest))
		start := len(longest) - 5
		if start < 0 {
			start = 0
		}
		for _, op := range longest[start:] {
			msg += "\n  " + registerModel.DescribeOperation(op.Input, op.Output)
		}
		msg += "\nand no operation of the rest can follow it; the rest's earliest:"
		msg += "\n  " + earliestOutside(parts[p], longest)
		return msg
	}
	return "the history is not linearizable"
}

// earliestOutside describes the operation of part that completes first among those not in
// prefix.
func earliestOutside(part, prefix []porcupine.Operation) string {
	in := map[porcupine.Operation]bool{}
	for _, op := range prefix {
		in[op] = true
	}
	var first *porcupine.Operation
	for n := range part {
		if !in[part[n]] && (first == nil || part[n].Return < first.Return) {
			first = &part[n]
		}
	}
	if first == nil {
		return "(none)"
	}
	return registerModel.DescribeOperation(first.Input, first.Output)
}

func run(r io.Reader, timeout time.Duration, html string) (int, string) {
	var ops []Op
	if err := json.NewDecoder(r).Decode(&ops); err != nil {
		return 2, fmt.Sprintf("reading the history: %v", err)
	}
	if err := verdict(ops, timeout, html); err != nil {
		if ce, ok := err.(*checkError); ok && !ce.timedOut {
			return 1, err.Error()
		}
		return 2, err.Error()
	}
	return 0, fmt.Sprintf("linearizable: %d operations", len(ops))
}

func main() {
	timeout := flag.Duration("timeout", 5*time.Minute, "give up (exit 2) after this long")
	html := flag.String("html", "", "write porcupine's visualization of the history to this file")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: histcheck [-timeout D] [-html FILE] HISTORY.json")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	code, msg := run(f, *timeout, *html)
	if code == 0 {
		fmt.Println(msg)
	} else {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(code)
}
