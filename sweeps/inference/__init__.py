"""After a sweep: its best model as a Python object, and batch inference with it on Ray Data.

    sweeps predict outputs/digits --input data/*.parquet --output preds/

    from sweeps import load_best, predict
    model, tokenizer = load_best("outputs/hf_text")          # Pretrained(model, processor)
    ds = predict("models:/digits/1", "data/*.parquet", output="preds/", concurrency=2)

``bundle`` decides what a source is (a sweep, a checkpoint directory, an MLflow model URI) and
loads it; ``hf`` reads Hugging Face checkpoints offline; ``data`` checks and reads the input
files and picks the model's column; ``batch`` is ``predict`` (an actor pool over
``map_batches``) and ``predictor`` one actor of it; ``cli`` is ``sweeps predict``.
"""
