package main

import (
	"strings"
	"testing"
	"time"
)

func s(v string) *string { return &v }

func check(t *testing.T, ops []Op) error {
	t.Helper()
	return verdict(ops, 10*time.Second, "")
}

func TestSequentialRegisterIsLinearizable(t *testing.T) {
	ops := []Op{
		{Client: 0, Key: "r", Kind: "read", Status: "ok", Invoke: 1, Complete: 2},
		{Client: 0, Key: "r", Kind: "write", Value: s("a"), Status: "ok", Invoke: 3, Complete: 4},
		{Client: 1, Key: "r", Kind: "cas", Old: s("a"), New: s("b"), Swapped: true, Status: "ok", Invoke: 5, Complete: 6},
		{Client: 1, Key: "r", Kind: "cas", Old: s("a"), New: s("c"), Swapped: false, Status: "ok", Invoke: 7, Complete: 8},
		{Client: 2, Key: "r", Kind: "read", Value: s("b"), Status: "ok", Invoke: 9, Complete: 10},
	}
	if err := check(t, ops); err != nil {
		t.Fatal(err)
	}
}

func TestStaleReadAfterAcknowledgedWriteIsCaught(t *testing.T) {
	ops := []Op{
		{Client: 0, Key: "r", Kind: "write", Value: s("a"), Status: "ok", Invoke: 1, Complete: 2},
		{Client: 0, Key: "other", Kind: "write", Value: s("x"), Status: "ok", Invoke: 1, Complete: 2},
		{Client: 1, Key: "r", Kind: "write", Value: s("b"), Status: "ok", Invoke: 3, Complete: 4},
		// After b was acknowledged, a read sees a again: a stale read.
		{Client: 2, Key: "r", Kind: "read", Value: s("a"), Status: "ok", Invoke: 5, Complete: 6},
	}
	err := check(t, ops)
	if err == nil {
		t.Fatal("a stale read after an acknowledged write passed the check")
	}
	if !strings.Contains(err.Error(), "key r is not linearizable") {
		t.Fatalf("the violation does not name key r: %v", err)
	}
}

func TestUnknownWritesMayHappenLateOrNever(t *testing.T) {
	ops := []Op{
		{Client: 0, Key: "r", Kind: "write", Value: s("a"), Status: "ok", Invoke: 1, Complete: 2},
		// Its outcome never came: it may take effect any time after its invocation...
		{Client: 1, Key: "r", Kind: "write", Value: s("b"), Status: "unknown", Invoke: 3, Complete: 4},
		{Client: 2, Key: "r", Kind: "read", Value: s("a"), Status: "ok", Invoke: 10, Complete: 11},
		{Client: 2, Key: "r", Kind: "read", Value: s("b"), Status: "ok", Invoke: 12, Complete: 13},
		// ...and a refused one never happened.
		{Client: 0, Key: "r", Kind: "write", Value: s("c"), Status: "fail", Invoke: 14, Complete: 15},
		{Client: 2, Key: "r", Kind: "read", Value: s("b"), Status: "ok", Invoke: 16, Complete: 17},
	}
	if err := check(t, ops); err != nil {
		t.Fatal(err)
	}
	// But a refused write that is read back is a violation.
	ops = append(ops, Op{Client: 2, Key: "r", Kind: "read", Value: s("c"), Status: "ok", Invoke: 18, Complete: 19})
	if check(t, ops) == nil {
		t.Fatal("a refused write read back passed the check")
	}
}

func TestACompareAndSetThatSwappedTwiceIsCaught(t *testing.T) {
	ops := []Op{
		{Client: 0, Key: "r", Kind: "write", Value: s("a"), Status: "ok", Invoke: 1, Complete: 2},
		{Client: 1, Key: "r", Kind: "cas", Old: s("a"), New: s("b"), Swapped: true, Status: "ok", Invoke: 3, Complete: 4},
		{Client: 2, Key: "r", Kind: "cas", Old: s("a"), New: s("c"), Swapped: true, Status: "ok", Invoke: 5, Complete: 6},
	}
	if check(t, ops) == nil {
		t.Fatal("two compare-and-sets from the same value both swapped, one after the other")
	}
}

func TestBadInputIsRefused(t *testing.T) {
	code, msg := run(strings.NewReader(`[{"key":"r","kind":"write","status":"maybe","invoke":1,"complete":2}]`), time.Second, "")
	if code != 2 || !strings.Contains(msg, "status") {
		t.Fatalf("code %d: %s", code, msg)
	}
	code, _ = run(strings.NewReader(`[{"key":"r","kind":"write","value":"a","status":"ok","invoke":1,"complete":2}]`), time.Second, "")
	if code != 0 {
		t.Fatalf("a one-write history: code %d", code)
	}
}
