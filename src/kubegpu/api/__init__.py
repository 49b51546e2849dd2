"""Wire formats: the kubelet's device-plugin API v1beta1 and pod-resources API v1.

Owns the ``.proto`` files (written by us from the kubelet's fact tables), their
committed generated Python code, and the constants of those APIs. Must not
import anything else of kubegpu: every other package builds on this one.
"""
