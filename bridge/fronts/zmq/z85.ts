// Z85 (ZeroMQ RFC 32): how CurveZMQ keys are written as text. zeromq.js generates keys in Z85 but
// hands the ZAP handler raw 32-byte keys, so the allow-list check needs the encoder.
const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

export function z85Encode(data: Uint8Array): string {
  if (data.length % 4 !== 0) throw new RangeError("Z85 encodes multiples of 4 bytes");
  let out = "";
  for (let i = 0; i < data.length; i += 4) {
    let value = ((data[i]! << 24) >>> 0) + (data[i + 1]! << 16) + (data[i + 2]! << 8) + data[i + 3]!;
    const chunk: string[] = [];
    for (let j = 0; j < 5; j++) {
      chunk.unshift(ALPHABET[value % 85]!);
      value = Math.floor(value / 85);
    }
    out += chunk.join("");
  }
  return out;
}
