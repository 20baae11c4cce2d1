"""The minimal pendant client: everything a small firmware must do (docs/device-minimal.md).

usage: python minimal_client.py "ws://HOST:8765/v1/device?token=lbd_..." question.wav
The WAV is 16 kHz mono 16-bit, the defaults of `start`. Prints what was heard and the answer.
"""

import json
import sys
import time
import wave

from websockets.sync.client import connect

FRAME_BYTES = 320 * 2  # 20 ms of 16 kHz 16-bit mono audio


def main(url: str, wav_path: str) -> int:
    """Ask the question in ``wav_path``; 0 once the answer (or an empty transcript) arrived."""
    with wave.open(wav_path, "rb") as wav:
        pcm = wav.readframes(wav.getnframes())
    with connect(url, proxy=None) as ws:  # the token is in the URL: no headers needed
        ws.send(json.dumps({"type": "start"}))  # hello + button pressed, all defaults
        for i in range(0, len(pcm), FRAME_BYTES):
            ws.send(pcm[i : i + FRAME_BYTES])  # one binary frame every 20 ms, like a mic
            time.sleep(0.02)
        ws.send(json.dumps({"type": "end"}))  # button released: transcribe and answer
        while True:
            frame = json.loads(ws.recv(timeout=60))
            kind = frame["type"]
            if kind == "error":
                print("error:", frame["message"])
                return 1
            if kind == "transcript" and frame["final"]:
                print("heard:", frame["text"])
                if not frame["question"]:
                    return 0  # nothing was said: no answer will come
            if kind == "reply":
                print("reply:", frame["text"])
                return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
