"""What the two examples share: writing the model, the data and a job file
the way spotdeck reads them (spotdeck-job(5): "model" may be an ONNX file,
"dataset": "npy" reads train_x.npy, train_y.npy, test_x.npy, test_y.npy)."""
import json, os, warnings
import numpy as np
import torch


def export_onnx(model, example, path):
    """torch.onnx.export in training mode, so batch-norm stays a node of its
    own (an eval-mode export folds it into the convolutions) and its running
    statistics are initializers spotdeck trains on."""
    model.train()
    # The exporter warns about every batch-norm's num_batches_tracked and
    # other internals that change nothing for spotdeck.
    warnings.filterwarnings("ignore", category=UserWarning)
    torch.onnx.export(model, example, path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})


def save_npy(out, x_train, y_train, x_test, y_test):
    """The four arrays, C order, labels as int64 class ids."""
    d = os.path.join(out, "data")
    os.makedirs(d, exist_ok=True)
    for name, a in (("train_x", x_train), ("train_y", y_train), ("test_x", x_test), ("test_y", y_test)):
        np.save(os.path.join(d, name + ".npy"), np.ascontiguousarray(a))
    return d


def write_job(out, **job):
    """The job file; its model path and data_dir are relative to the job
    file's folder (spotdeck-job(5)), so the folder can be moved with its
    data."""
    if job.get("data_dir"):
        job["data_dir"] = os.path.relpath(os.path.abspath(job["data_dir"]), os.path.abspath(out))
    path = os.path.join(out, "job.json")
    with open(path, "w") as f:
        json.dump(job, f, indent=2)
        f.write("\n")
    return path
