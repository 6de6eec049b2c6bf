"""After a sweep: its best model as a Python object, and batch inference with it on Ray Data.

    sweeps predict outputs/digits --input data/*.parquet --output preds/

    from sweeps import load_best, predict
    model, tokenizer = load_best("outputs/hf_text")          # Pretrained(model, processor)
    ds = predict("models:/digits/1", "data/*.parquet", output="preds/", concurrency=2)

Its modules: docs/development.md#how-the-code-is-laid-out.
"""
