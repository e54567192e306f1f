"""Calls helloworld.Greeter/SayHello with Python's grpcio, on command.

Usage: greeter_client.py TARGET   (e.g. xds:///helloworld.Greeter, or 127.0.0.1:10000)

With an xds:/// target, grpcio resolves the name through the xDS server its bootstrap file
names (GRPC_XDS_BOOTSTRAP). Reads commands on stdin, one a line, and answers each with
one JSON line on stdout:

    call N [KEY=VALUE ...]  ->  {"answered": {"ADDRESS": COUNT, ...},
                                 "errors": ["CODE: details", ...]}
    quit                    ->  exits

Each KEY=VALUE after the count is request metadata every call of the command carries (a
header: `dubbo.tag=gray` tags the calls as a Dubbo consumer's attachment does).

The request and reply are encoded by hand (HelloRequest and HelloReply each hold one
string in field 1), so no generated code is needed. The greeter's reply names the address
of the server that answered ("Hello NAME from ADDRESS").
"""

import json
import sys

import grpc

METHOD = "/helloworld.Greeter/SayHello"


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_request(name):
    data = name.encode()
    return b"\x0a" + varint(len(data)) + data


def decode_reply(data):
    """The string in field 1 of a HelloReply."""
    i = 0
    while i < len(data):
        key = data[i]
        i += 1
        length, shift = 0, 0
        while True:
            byte = data[i]
            i += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if key == 0x0A:
            return data[i : i + length].decode()
        i += length
    return ""


def main():
    target = sys.argv[1]
    channel = grpc.insecure_channel(target)
    say_hello = channel.unary_unary(METHOD)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        count = int(words[1]) if len(words) > 1 else 1
        metadata = [tuple(word.split("=", 1)) for word in words[2:] if "=" in word]
        answered, errors = {}, []
        for i in range(count):
            try:
                request = encode_request(f"python-{i}")
                reply = decode_reply(say_hello(request, timeout=5, metadata=metadata))
                address = reply.rsplit(" from ", 1)[-1]
                answered[address] = answered.get(address, 0) + 1
            except grpc.RpcError as e:
                errors.append(f"{e.code().name}: {e.details()}")
        print(json.dumps({"answered": answered, "errors": errors}), flush=True)
    channel.close()


if __name__ == "__main__":
    main()
