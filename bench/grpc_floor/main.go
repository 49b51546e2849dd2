// Command grpc_floor is the Go reference of bench/grpc_floor.py: the least a device-plugin server written
// in Go with grpc-go does for the kubelet's Allocate and GetPreferredAllocation calls, on a unix socket.
//
// It owns only that: a DevicePlugin v1beta1 service registered by hand (no generated code), a codec that
// hands the handlers the raw request bytes, and a hand-written protobuf encoding of the two messages it
// answers. Allocate answers like a device plugin's envvar strategy (NVIDIA_VISIBLE_DEVICES = the requested
// IDs joined by commas, one container response per container request); GetPreferredAllocation picks the
// must-include IDs, then the available ones in order, up to the size. It must not grow plugin logic: it is
// the floor a Go server sets on this machine, timed by the same Python client as the Python servers.
//
// Usage: grpc_floor -socket PATH. It prints "serving" on stdout once the socket listens, and on SIGTERM or
// SIGINT stops and removes the socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"google.golang.org/grpc"
)

// rawCodec passes message bytes through: the handlers decode and encode the wire format themselves.
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return b, nil
}

func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	// The transport may reuse data's buffer after Unmarshal returns.
	*p = append((*p)[:0], data...)
	return nil
}

func (rawCodec) String() string { return "raw" }

// Protobuf wire format: the few pieces these two messages need.

const (
	wireVarint = 0
	wireBytes  = 2
)

var errTruncated = errors.New("truncated message")

func readVarint(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * uint(i))
		if b[i] < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errTruncated
}

// field is one decoded field: bytes for length-delimited ones, num for varints.
type field struct {
	number int
	wire   int
	bytes  []byte
	num    uint64
}

func fields(b []byte) ([]field, error) {
	var out []field
	for len(b) > 0 {
		key, n, err := readVarint(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		f := field{number: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case wireVarint:
			if f.num, n, err = readVarint(b); err != nil {
				return nil, err
			}
			b = b[n:]
		case wireBytes:
			size, n, err := readVarint(b)
			if err != nil || uint64(len(b)-n) < size {
				return nil, errTruncated
			}
			f.bytes = b[n : n+int(size)]
			b = b[n+int(size):]
		default:
			return nil, fmt.Errorf("unexpected wire type %d", f.wire)
		}
		out = append(out, f)
	}
	return out, nil
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendBytes(b []byte, number int, value []byte) []byte {
	b = appendVarint(b, uint64(number)<<3|wireBytes)
	b = appendVarint(b, uint64(len(value)))
	return append(b, value...)
}

// stringsOf returns the values of the repeated string field `number`.
func stringsOf(fs []field, number int) []string {
	var out []string
	for _, f := range fs {
		if f.number == number && f.wire == wireBytes {
			out = append(out, string(f.bytes))
		}
	}
	return out
}

// allocate answers AllocateRequest{container_requests=1: {devices_ids=1}} with
// AllocateResponse{container_responses=1: {envs=1: map entry {key=1, value=2}}}.
func allocate(req []byte) ([]byte, error) {
	top, err := fields(req)
	if err != nil {
		return nil, err
	}
	var resp []byte
	for _, c := range top {
		if c.number != 1 || c.wire != wireBytes {
			continue
		}
		inner, err := fields(c.bytes)
		if err != nil {
			return nil, err
		}
		ids := strings.Join(stringsOf(inner, 1), ",")
		entry := appendBytes(nil, 1, []byte("NVIDIA_VISIBLE_DEVICES"))
		entry = appendBytes(entry, 2, []byte(ids))
		resp = appendBytes(resp, 1, appendBytes(nil, 1, entry))
	}
	return resp, nil
}

// preferred answers PreferredAllocationRequest{container_requests=1: {available_deviceIDs=1,
// must_include_deviceIDs=2, allocation_size=3}} with PreferredAllocationResponse{container_responses=1:
// {deviceIDs=1}}.
func preferred(req []byte) ([]byte, error) {
	top, err := fields(req)
	if err != nil {
		return nil, err
	}
	var resp []byte
	for _, c := range top {
		if c.number != 1 || c.wire != wireBytes {
			continue
		}
		inner, err := fields(c.bytes)
		if err != nil {
			return nil, err
		}
		size := 0
		for _, f := range inner {
			if f.number == 3 && f.wire == wireVarint {
				size = int(int32(f.num))
			}
		}
		chosen := map[string]bool{}
		var picks []byte
		for _, id := range append(stringsOf(inner, 2), stringsOf(inner, 1)...) {
			if len(chosen) >= size {
				break
			}
			if !chosen[id] {
				chosen[id] = true
				picks = appendBytes(picks, 1, []byte(id))
			}
		}
		resp = appendBytes(resp, 1, picks)
	}
	return resp, nil
}

// devicePlugin is the handler type of the hand-written service description.
type devicePlugin interface {
	handle(func([]byte) ([]byte, error), []byte) ([]byte, error)
}

type server struct{}

func (server) handle(answer func([]byte) ([]byte, error), req []byte) ([]byte, error) {
	return answer(req)
}

// methodHandler is grpc.MethodDesc's Handler type (unexported in grpc-go 1.33). No interceptors are set.
type methodHandler = func(srv interface{}, ctx context.Context, dec func(interface{}) error, _ grpc.UnaryServerInterceptor) (interface{}, error)

func unary(answer func([]byte) ([]byte, error)) methodHandler {
	return func(srv interface{}, _ context.Context, dec func(interface{}) error, _ grpc.UnaryServerInterceptor) (interface{}, error) {
		var req []byte
		if err := dec(&req); err != nil {
			return nil, err
		}
		return srv.(devicePlugin).handle(answer, req)
	}
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: "v1beta1.DevicePlugin",
	HandlerType: (*devicePlugin)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Allocate", Handler: unary(allocate)},
		{MethodName: "GetPreferredAllocation", Handler: unary(preferred)},
	},
	Streams:  []grpc.StreamDesc{},
	Metadata: "api.proto",
}

func main() {
	socket := flag.String("socket", "", "unix socket path to serve on")
	flag.Parse()
	if *socket == "" {
		fmt.Fprintln(os.Stderr, "grpc_floor: -socket is required")
		os.Exit(2)
	}
	if err := os.Remove(*socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "grpc_floor: %v\n", err)
		os.Exit(1)
	}
	listener, err := net.Listen("unix", *socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "grpc_floor: %v\n", err)
		os.Exit(1)
	}
	s := grpc.NewServer(grpc.CustomCodec(rawCodec{}))
	s.RegisterService(&serviceDesc, server{})
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		s.Stop() // closes the listener, which removes the socket file
	}()
	fmt.Println("serving")
	if err := s.Serve(listener); err != nil {
		fmt.Fprintf(os.Stderr, "grpc_floor: %v\n", err)
		os.Exit(1)
	}
	os.Remove(*socket)
}
