"""Checks an ONNX model webtrain exported, with the real runtimes: onnx's checker, then ONNX
Runtime on MNIST's test set. Prints one JSON line: the images ONNX Runtime classes right, and
how far its logits are from webtrain's on the first of them.

  python onnx_check.py MODEL.onnx MNIST_DIR WEBTRAIN_LOGITS.f32 N
WEBTRAIN_LOGITS.f32: webtrain's logits for the first N test images, [N, 10] little-endian f32.
"""
import json, sys

import numpy as np
import onnx
import onnxruntime


def main():
    path, data, logits_path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    images = np.fromfile(f"{data}/t10k-images-idx3-ubyte", dtype=np.uint8)[16:]
    images = images.reshape(-1, 1, 28, 28).astype(np.float32) / 255.0
    labels = np.fromfile(f"{data}/t10k-labels-idx1-ubyte", dtype=np.uint8)[8:]
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    [input_] = session.get_inputs()
    outputs = [session.run(None, {input_.name: images[i:i + 1000]})[0]
               for i in range(0, len(images), 1000)]
    logits = np.concatenate(outputs)
    ours = np.fromfile(logits_path, dtype="<f4").reshape(n, 10)
    print(json.dumps({
        "input": input_.name,
        "input_shape": [str(d) for d in input_.shape],
        "opset": model.opset_import[0].version,
        "correct": int((logits.argmax(1) == labels).sum()),
        "total": int(len(labels)),
        "max_logit_diff": float(np.abs(logits[:n] - ours).max()),
    }))


if __name__ == "__main__":
    main()
