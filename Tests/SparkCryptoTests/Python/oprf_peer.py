"""The other side of the OPRF interop tests: RFC 9497's VOPRF on P384-SHA384 from PyPI's `voprf`
(asterized/voprf, BSD-3-Clause; PyPI has no P-256 implementation of RFC 9497).

    oprf_peer.py public-key SEED INFO          -> pkS
    oprf_peer.py evaluate SEED INFO BLINDED    -> "EVALUATED PROOF" (its server, our client)
    oprf_peer.py output SEED INFO INPUT        -> Evaluate(input), the PRF computed directly
    oprf_peer.py client INPUT PUBLIC_KEY       -> prints BLINDED, reads "EVALUATED PROOF" on
                                                  stdin, prints the finalized output (its client,
                                                  our server); exits 1 when the proof fails

Every argument and answer is hex.
"""
import sys

from voprf import p384

PROOF = 96  # c ‖ s, two 48-byte scalars
ELEMENT = 49  # a compressed P-384 point


def split(output: bytes) -> tuple[bytes, bytes]:
    """voprf serializes a VerifiableOutput as the proof followed by the element."""
    assert len(output) == PROOF + ELEMENT and output[PROOF] in (2, 3), output.hex()
    return output[PROOF:], output[:PROOF]


def main() -> int:
    command, *args = sys.argv[1:]
    if command == "public-key":
        print(p384.Evaluator.from_seed(bytes.fromhex(args[0]), bytes.fromhex(args[1])).public_key.serialize().hex())
    elif command == "evaluate":
        server = p384.Evaluator.from_seed(bytes.fromhex(args[0]), bytes.fromhex(args[1]))
        element, proof = split(server.evaluate(p384.BlindedInput.deserialize(bytes.fromhex(args[2]))).serialize())
        print(element.hex(), proof.hex())
    elif command == "output":
        server = p384.Evaluator.from_seed(bytes.fromhex(args[0]), bytes.fromhex(args[1]))
        print(server.evaluate_known_input(bytes.fromhex(args[2])).hex())
    elif command == "client":
        client, blinded = p384.Client.blind(bytes.fromhex(args[0]))
        print(blinded.serialize().hex(), flush=True)
        element, proof = (bytes.fromhex(part) for part in sys.stdin.readline().split())
        output = p384.VerifiableOutput.deserialize(proof + element)
        try:
            print(client.finalize(output, p384.PublicKey.deserialize(bytes.fromhex(args[1]))).hex())
        except ValueError as error:
            print(error, file=sys.stderr)
            return 1
    else:
        print(__doc__, file=sys.stderr)
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main())
