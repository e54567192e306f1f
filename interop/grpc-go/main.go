// A grpc-go client of helloworld.Greeter/SayHello for the xDS interop tests, driven on
// stdin like the Python client (xds/tests/python/greeter_client.py):
//
//	grpc-go-client TARGET   (e.g. xds:///helloworld.Greeter)
//
// With an xds:/// target, grpc-go resolves the name through the xDS server its bootstrap
// file names (GRPC_XDS_BOOTSTRAP). Commands, one a line, each answered by one JSON line:
//
//	call N [KEY=VALUE ...]  ->  {"answered": {"ADDRESS": COUNT, ...}, "errors": ["CODE: details", ...]}
//	quit                    ->  exits
//
// Each KEY=VALUE is request metadata every call of the command carries (dubbo.tag=gray).
// Requests and replies are encoded by hand (HelloRequest and HelloReply each hold one
// string in field 1), so no generated code is needed; the reply names the address of the
// server that answered ("Hello NAME from ADDRESS").
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	_ "google.golang.org/grpc/xds" // the xds:/// resolver and its balancers
)

const method = "/helloworld.Greeter/SayHello"

// raw passes messages through as bytes, encoded by hand.
type raw struct{}

func (raw) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (raw) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (raw) Name() string { return "proto" }

func varint(n int) []byte {
	var out []byte
	for {
		b := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

func request(name string) []byte {
	return append(append([]byte{0x0a}, varint(len(name))...), name...)
}

// reply is the string in field 1 of a HelloReply.
func reply(data []byte) string {
	for i := 0; i < len(data); {
		key := data[i]
		i++
		length, shift := 0, 0
		for i < len(data) {
			b := data[i]
			i++
			length |= int(b&0x7f) << shift
			shift += 7
			if b&0x80 == 0 {
				break
			}
		}
		if i+length > len(data) {
			return ""
		}
		if key == 0x0a {
			return string(data[i : i+length])
		}
		i += length
	}
	return ""
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: grpc-go-client TARGET")
		os.Exit(2)
	}
	conn, err := grpc.NewClient(os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpc-go-client:", err)
		os.Exit(1)
	}
	defer conn.Close()
	lines := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for lines.Scan() {
		words := strings.Fields(lines.Text())
		if len(words) == 0 {
			continue
		}
		if words[0] == "quit" {
			return
		}
		count := 1
		if len(words) > 1 {
			if n, err := strconv.Atoi(words[1]); err == nil {
				count = n
			}
		}
		var pairs []string
		for _, word := range words[min(2, len(words)):] {
			if k, v, ok := strings.Cut(word, "="); ok {
				pairs = append(pairs, k, v)
			}
		}
		answered := map[string]int{}
		errors := []string{}
		for i := 0; i < count; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ctx = metadata.AppendToOutgoingContext(ctx, pairs...)
			req, rep := request(fmt.Sprintf("grpc-go-%d", i)), []byte(nil)
			err := conn.Invoke(ctx, method, &req, &rep, grpc.ForceCodec(raw{}))
			cancel()
			if err != nil {
				s := status.Convert(err)
				errors = append(errors, fmt.Sprintf("%s: %s", strings.ToUpper(s.Code().String()), s.Message()))
				continue
			}
			message := reply(rep)
			address := message[strings.LastIndex(message, " from ")+len(" from "):]
			answered[address]++
		}
		if err := out.Encode(map[string]any{"answered": answered, "errors": errors}); err != nil {
			return
		}
	}
}
